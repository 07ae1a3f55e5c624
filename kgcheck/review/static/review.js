// The review page: a queue of verdicts, decided with t / f / s, undone with u.
// Every text from the KG, the model or the evidence goes in with textContent, never as HTML.
"use strict";

const token = document.querySelector('meta[name="review-token"]').content;
const view = { items: [], progress: null, estimate: null, current: 0, filter: "all", stale: false };

function el(tag, props, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props || {})) {
    if (key === "class") node.className = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else if (key === "dataset") Object.assign(node.dataset, value);
    else node.setAttribute(key, value);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function banner(text) {
  const box = document.getElementById("banner");
  box.textContent = text || "";
  box.hidden = !text;
}

async function api(path, body) {
  const options = { headers: { "X-Review-Token": token }, cache: "no-store" };
  if (body !== undefined) {
    options.method = "POST";
    options.headers["Content-Type"] = "application/json";
    options.body = JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(path, options);
  } catch (error) {
    throw new Error("the review server does not answer (was it stopped?)");
  }
  const data = await response.json().catch(() => ({}));
  if (response.status === 403 && data.stale_token) {
    view.stale = true;
    banner(data.error);
  }
  if (!response.ok) throw new Error(data.error || `HTTP ${response.status}`);
  return data;
}

function labelBadge(label) {
  return el("span", { class: `label ${label}` }, label);
}

function visible(item) {
  const model = item.question.model.label;
  switch (view.filter) {
    case "pending": return !item.review;
    case "decided": return Boolean(item.review);
    case "model-F": return model === "F";
    case "model-T": return model === "T";
    case "model-NA": return model === "NA";
    case "model-NEI": return model === "NEI";
    case "ties": return Boolean(item.question.tie);
    default: return true;
  }
}

function statusText(item) {
  if (item.status === "saving") return "saving…";
  if (item.status === "failed") return "not saved";
  if (item.review) return `${item.review.label} saved`;
  return "";
}

function renderProgress() {
  const p = view.progress;
  if (!p) return;
  document.getElementById("bar-fill").style.width = `${p.total ? (100 * p.decided) / p.total : 0}%`;
  document.getElementById("progress-text").textContent =
    `${p.decided} of ${p.total} decided · T ${p.T} · F ${p.F} · skip ${p.skip}`;
}

function pct(value) {
  return `${(100 * value).toFixed(1)}%`;
}

function intervalRow(name, found, id) {
  if (!found) return el("li", { id }, `${name}: —`);
  return el("li", { id }, `${name}: ${pct(found.estimate)} [${pct(found.low)}, ${pct(found.high)}]`,
    found.fallback ? el("span", { class: "muted" }, ` (${found.fallback})`) : "");
}

function renderEstimate() {
  const box = document.getElementById("estimate");
  const e = view.estimate;
  if (!box || !e) return;
  const parts = [el("h2", {}, "Accuracy estimate")];
  if (e.error) {
    parts.push(el("p", { class: "muted" }, e.error));
  } else {
    parts.push(el("p", { class: "muted", id: "estimate-text" },
      `${e.labels} labels (${e.true} true), ${e.design} sample, ${Math.round(100 * e.confidence)}% intervals`));
    parts.push(el("ul", { class: "intervals" },
      intervalRow("Wilson", e.wilson, "est-wilson"),
      intervalRow("Beta posterior (HDI)", e.beta, "est-beta"),
      intervalRow("PPI with the verdicts", e.ppi, "est-ppi")));
    if (e.needs) parts.push(el("p", { class: "muted" }, e.needs));
    for (const warning of e.warnings || []) parts.push(el("p", { class: "warning" }, warning));
    if (e.margin !== null && e.margin !== undefined) {
      const target = e.target ? ` · target ±${pct(e.target)}` : "";
      parts.push(el("p", { id: "margin", class: e.reached ? "reached" : "" },
        `Margin of error ±${pct(e.margin)}${target}`,
        e.reached ? " — reached: you may stop labelling." : ""));
    }
  }
  box.replaceChildren(...parts);
}

function renderQueue() {
  const list = document.getElementById("queue");
  list.replaceChildren(...view.items.map((item, index) => {
    const row = el("li", {
      dataset: { factId: item.fact_id },
      class: index === view.current ? "current" : "",
      onclick: () => { view.current = index; render(); },
    },
    el("span", { class: "what", title: item.question.fact.readable.text },
      item.question.fact.readable.text),
    labelBadge(item.question.model.label),
    el("span", { class: `state ${item.status || (item.review ? "saved" : "")}` }, statusText(item)));
    row.hidden = !visible(item);
    return row;
  }));
}

function renderCard() {
  const card = document.getElementById("card");
  const item = view.items[view.current];
  if (!item) {
    card.replaceChildren(el("p", { class: "muted" }, "No facts match this filter."));
    return;
  }
  const q = item.question;
  const fact = q.fact;
  const x = q.explanation || {};
  // The raw term as the KG gives it: an RDF term keeps its datatype or language.
  const term = (name) => el("dd", {}, fact.readable[name],
    el("span", { class: "raw" }, (fact.terms && fact.terms[name]) || fact[name]));
  const parts = [
    el("p", { class: "meta" },
      `Fact ${fact.id}${fact.dataset ? " · " + fact.dataset : ""} · ${item.position + 1} of ${view.items.length}`),
    el("p", { class: "readable", id: "readable" }, fact.readable.text),
    el("dl", { class: "triple" },
      el("dt", {}, "subject"), term("subject"),
      el("dt", {}, "predicate"), term("predicate"),
      el("dt", {}, "object"), term("object")),
  ];
  if (fact.sentence) parts.push(el("p", { class: "muted" }, fact.sentence));
  parts.push(el("div", { class: "answer" },
    el("div", {}, "Model: ", labelBadge(q.model.label), ` ${q.model.method || ""} · ${q.model.model || ""}`),
    x.confidence !== null && x.confidence !== undefined
      ? el("div", { id: "confidence" }, `Confidence that it is true: ${Number(x.confidence).toFixed(3)} (${x.confidence_source})`) : null,
    x.rationale ? el("p", { id: "rationale" }, `Reason: ${x.rationale}`) : null,
    q.model.raw ? el("pre", { id: "raw" }, q.model.raw) : null,
    q.model.error ? el("pre", {}, `error: ${q.model.error}`) : null,
    (x.problems || []).length
      ? el("ul", { class: "problems" }, x.problems.map((p) => el("li", {}, p))) : null));
  if ((q.citations || []).length) {
    parts.push(el("h2", {}, `Cited passages (${q.citations.length})`),
      el("ul", { class: "evidence", id: "citations" }, q.citations.map((c) =>
        el("li", {}, el("div", { class: "source" }, `${c.passage} · ${c.url || c.doc_id || ""}`),
          el("div", { class: "text" }, c.text)))));
  }
  if (item.annotations) {
    parts.push(el("h2", {}, "Annotators disagree"),
      el("ul", { class: "votes", id: "annotations" }, Object.entries(item.annotations).map(([who, label]) =>
        el("li", {}, labelBadge(label), ` ${who}`))));
  }
  if (q.votes.length) {
    parts.push(el("h2", {}, q.tie ? "Votes (a tie)" : "Votes"),
      el("ul", { class: "votes" }, q.votes.map((v) =>
        el("li", {}, labelBadge(v.label || "NA"), ` ${v.model || ""}`, v.raw ? ` — ${v.raw}` : ""))));
    if (q.judge) {
      const said = q.judge.decided ? "decided the tie" : "left the tie undecided";
      parts.push(el("p", { class: "judge", id: "judge" }, "Judge: ", labelBadge(q.judge.label || "NA"),
        ` ${q.judge.model || ""} ${said}`, q.judge.error ? ` (${q.judge.error})` : ""));
    }
  }
  if (q.evidence.length) {
    parts.push(el("h2", {}, `Evidence (${q.evidence.length})`),
      el("ul", { class: "evidence", id: "evidence" }, q.evidence.map((e) =>
        el("li", {},
          el("div", { class: "source" }, e.source || e.doc_id || "",
            e.similarity !== null && e.similarity !== undefined ? ` · similarity ${Number(e.similarity).toFixed(3)}` : "",
            e.passages > 1 ? ` · ${e.passages} overlapping passages merged` : ""),
          el("div", { class: "text" }, e.text)))));
  } else {
    parts.push(el("p", { class: "muted" }, "No evidence was retrieved for this verdict."));
  }
  const chosen = item.review ? item.review.label : (item.pending ? item.pending.label : null);
  const button = (label, text) => el("button", {
    class: `${label}${chosen === label ? " chosen" : ""}`, id: `btn-${label}`, type: "button",
    onclick: () => decide(label),
  }, text);
  const note = el("textarea", { id: "note", placeholder: "Note (optional)", rows: "2" });
  note.value = item.review ? item.review.note || "" : (item.pending ? item.pending.note : "");
  const status = el("span", { class: `status ${item.status || (item.review ? "saved" : "")}`, id: "status" },
    item.status === "failed" ? `Not saved: ${item.error}. ` : "",
    item.status === "failed" ? el("button", { type: "button", id: "retry", onclick: () => decide(item.pending.label) }, "Retry") : "",
    item.status === "saving" ? "Saving…" : "",
    !item.status && item.review ? `Saved: ${item.review.label}${item.review.reviewer ? " by " + item.review.reviewer : ""} at ${item.review.reviewed_at}` : "",
    !item.status && !item.review ? "Not decided yet" : "");
  if (q.suggestion) parts.push(suggestionBox(item, q.suggestion));
  if ((q.conversation || []).length) {
    parts.push(el("details", { id: "conversation" },
      el("summary", {}, `Conversation (${q.conversation.length} messages)`),
      q.conversation.map((turn) => el("div", { class: `turn ${turn.role}` },
        el("div", { class: "source" }, [turn.role, turn.step, turn.member, turn.sample !== undefined ? `sample ${turn.sample}` : null]
          .filter((x) => x !== null && x !== undefined).join(" · ")),
        el("pre", {}, turn.content)))));
  }
  parts.push(note, el("div", { class: "actions" },
    button("T", "True (t)"), button("F", "False (f)"), button("skip", "Skip (s)"),
    el("button", { type: "button", id: "btn-undo", onclick: () => undo() }, "Undo (u)"),
    status));
  card.replaceChildren(...parts);
}

// A suggested correction: accept it, edit its value, or reject it; sent with the decision.
function suggestionBox(item, suggestion) {
  const kept = item.review && item.review.correction ? item.review.correction : null;
  const choice = kept ? kept.decision : (item.correction ? item.correction.decision : "");
  const value = kept && kept.value ? kept.value : (item.correction && item.correction.value) || suggestion.value;
  const input = el("input", { id: "correction-value", type: "text", value });
  const radio = (decision, text) => {
    const box = el("input", { type: "radio", name: "correction", id: `correction-${decision}`, value: decision });
    box.checked = choice === decision;
    box.addEventListener("change", () => { item.correction = { decision, value: input.value }; });
    return el("label", {}, box, ` ${text}`);
  };
  input.addEventListener("input", () => {
    item.correction = { decision: "edit", value: input.value };
    document.getElementById("correction-edit").checked = true;
  });
  return el("div", { class: "suggestion", id: "suggestion" },
    el("h2", {}, "Suggested correction"),
    el("p", {}, `The ${suggestion.part} is wrong: `, el("span", { class: "raw" }, suggestion.current),
      " should be ", el("strong", {}, suggestion.value)),
    el("div", {}, radio("accept", "accept"), radio("edit", "accept with this value:"), " ", input,
      " ", radio("reject", "reject")));
}

function render() {
  renderProgress();
  renderEstimate();
  renderQueue();
  renderCard();
}

function move(step, onlyPending) {
  const n = view.items.length;
  for (let k = 1; k <= n; k += 1) {
    const index = view.current + step * k;
    if (index < 0 || index >= n) break;
    const item = view.items[index];
    if (visible(item) && (!onlyPending || !item.review)) { view.current = index; return true; }
  }
  return false;
}

async function decide(label) {
  const item = view.items[view.current];
  if (!item || view.stale || item.status === "saving") return;
  const noteBox = document.getElementById("note");
  const note = noteBox ? noteBox.value : "";
  // Read the correction before the card moves on to the next fact.
  const chosen = document.querySelector('input[name="correction"]:checked');
  const valueBox = document.getElementById("correction-value");
  const correction = chosen ? { decision: chosen.value, value: valueBox ? valueBox.value : "" } : {};
  item.pending = { label, note };
  item.status = "saving";
  // On to the next fact at once: this one shows its own saving / saved / not saved state.
  move(1, true) || move(1, false);
  render();
  try {
    const data = await api("api/decide", { fact_id: item.fact_id, label, note,
      correction: correction.decision || "",
      corrected_value: correction.decision === "edit" ? correction.value : "" });
    item.review = data.review;
    item.status = null;
    item.pending = null;
    view.progress = data.progress;
    view.estimate = data.estimate;
  } catch (error) {
    item.status = "failed";
    item.error = error.message;
    if (!view.stale) banner(`Decision on fact ${item.fact_id} not saved: ${error.message}`);
  }
  render();
}

async function undo() {
  if (view.stale) return;
  try {
    const data = await api("api/undo", {});
    view.progress = data.progress;
    view.estimate = data.estimate;
    if (data.undone) {
      const index = view.items.findIndex((i) => i.fact_id === data.undone);
      const item = view.items[index];
      item.review = null;
      item.status = null;
      item.pending = null;
      view.current = index;
    }
    banner(data.undone ? "" : "Nothing to undo.");
  } catch (error) {
    if (!view.stale) banner(`Undo failed: ${error.message}`);
  }
  render();
}

document.addEventListener("keydown", (event) => {
  if (event.ctrlKey || event.metaKey || event.altKey) return;
  const tag = event.target.tagName;
  if (tag === "TEXTAREA" || tag === "INPUT" || tag === "SELECT") return;
  const keys = { t: () => decide("T"), f: () => decide("F"), s: () => decide("skip"), u: undo,
    j: () => { move(1, false); render(); }, ArrowDown: () => { move(1, false); render(); },
    k: () => { move(-1, false); render(); }, ArrowUp: () => { move(-1, false); render(); } };
  const action = keys[event.key];
  if (action) { event.preventDefault(); action(); }
});

document.addEventListener("DOMContentLoaded", async () => {
  document.getElementById("filter").addEventListener("change", (event) => {
    view.filter = event.target.value;
    if (!visible(view.items[view.current] || { question: { model: {} } })) move(1, false) || move(-1, false);
    render();
  });
  try {
    const data = await api("api/state");
    view.items = data.items.map((item) => ({ ...item, status: null, pending: null }));
    view.progress = data.progress;
    view.estimate = data.estimate;
    document.getElementById("run").textContent = data.annotator ? `${data.run} · ${data.annotator}` : data.run;
    document.getElementById("labels-path").textContent = `decisions: ${data.labels}`;
    const first = view.items.findIndex((item) => !item.review);
    view.current = first >= 0 ? first : 0;
    document.body.dataset.ready = "true";
  } catch (error) {
    if (!view.stale) banner(`Cannot load the queue: ${error.message}`);
  }
  render();
});
