// kgcheck view: runs, a paged fact table with filters, one fact's steps, two runs side by side.
// Every text from a run goes in with textContent (el() below), never as HTML.
"use strict";

const TOKEN = document.querySelector('meta[name="kgcheck-token"]').content;
const FILTERS = [
  ["wrong", "wrong"], ["na", "NA"], ["nei", "NEI (NA, no failure)"], ["failed", "failed calls"],
  ["low", "low confidence"], ["reviewed", "reviewed"],
];
let RUNS = null;

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "onclick" || key === "onchange" || key === "onsubmit") node[key] = value;
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

// Append children, skipping the null of a part that does not apply.
function add(parent, ...children) {
  for (const child of children.flat(Infinity)) {
    if (child !== null && child !== undefined && child !== false) parent.append(child);
  }
}

function status(text) { document.getElementById("status").textContent = text || ""; }

async function api(path, params) {
  const query = new URLSearchParams();
  for (const [k, v] of Object.entries(params || {})) {
    if (v !== null && v !== undefined && v !== "") query.set(k, v);
  }
  let response;
  try {
    response = await fetch(`/api/${path}?${query}`, { headers: { "X-View-Token": TOKEN } });
  } catch (err) {
    throw new Error("the explorer's server does not answer (was kgcheck view stopped?)");
  }
  const body = await response.json().catch(() => ({ error: `HTTP ${response.status}` }));
  if (!response.ok) throw new Error(body.error || `HTTP ${response.status}`);
  return body;
}

function parseHash() {
  const raw = location.hash.replace(/^#/, "");
  const [view, query] = raw.split("?");
  return { view: view || "runs", params: Object.fromEntries(new URLSearchParams(query || "")) };
}

function link(view, params) {
  const query = new URLSearchParams();
  for (const [k, v] of Object.entries(params || {})) {
    if (v !== null && v !== undefined && v !== "") query.set(k, v);
  }
  const text = query.toString();
  return `#${view}${text ? "?" + text : ""}`;
}

function fmt(value, digits = 3) {
  if (value === null || value === undefined) return "–";
  if (typeof value === "number") return Number.isInteger(value) ? value.toLocaleString("en")
    : value.toFixed(digits);
  return String(value);
}

function labelCell(label) { return el("td", { class: `label-${label}` }, label ?? "–"); }

function runOptions(selected, except) {
  return RUNS.runs.filter((r) => r.run !== except).map((r) =>
    el("option", { value: r.run, selected: String(r.run) === String(selected) },
       `${r.run}: ${r.name}`));
}

function done(view) {
  document.body.dataset.view = view;
  document.body.dataset.ready = String(Number(document.body.dataset.ready || 0) + 1);
}

// -- runs -------------------------------------------------------------------------------

function renderRuns(main) {
  const rows = RUNS.runs.map((r) => {
    const s = r.scores;
    return el("tr", { "data-run": r.run },
      el("td", {}, el("a", { href: link("facts", { run: r.run }) }, r.name)),
      el("td", {}, r.dataset), el("td", {}, r.method), el("td", {}, (r.models || []).join(", ")),
      el("td", { class: "num" }, fmt(r.facts)),
      el("td", { class: "num" }, fmt(s.f1_true)), el("td", { class: "num" }, fmt(s.f1_false)),
      el("td", { class: "num" }, fmt(s.accuracy)),
      el("td", { class: "num" },
         el("a", { href: link("facts", { run: r.run, filters: "wrong" }) }, fmt(r.wrong))),
      el("td", { class: "num" },
         el("a", { href: link("facts", { run: r.run, filters: "na" }) }, fmt(r.labels.NA || 0))),
      el("td", { class: "num" }, fmt(r.failed)), el("td", { class: "num" }, fmt(r.reviewed)),
      el("td", { class: "num" }, fmt(r.seconds, 1)));
  });
  add(main, 
    el("h2", {}, "Runs"),
    el("table", { id: "runs" },
      el("thead", {}, el("tr", {}, ...["run", "dataset", "method", "models", "facts", "F1(T)",
        "F1(F)", "accuracy", "wrong", "NA", "failed", "reviewed", "seconds"].map((h) =>
        el("th", {}, h)))),
      el("tbody", {}, rows)),
    el("h2", {}, "Figures"),
    el("div", { class: "figures", id: "figures" }, RUNS.figures.map((f) =>
      el("figure", { "data-figure": f.id },
        el("img", { src: `/figure/${encodeURIComponent(f.id)}.png?token=${TOKEN}`,
                    alt: f.title, loading: "lazy" }),
        el("figcaption", {}, f.title)))));
}

// -- facts ------------------------------------------------------------------------------

async function renderFacts(main, params) {
  const run = Number(params.run || 0);
  const chosen = new Set((params.filters || "").split(",").filter(Boolean));
  const page = Number(params.page || 0);
  const [meta, data] = await Promise.all([
    api("predicates", { run }),
    api("facts", { run, filters: [...chosen].join(","), predicate: params.predicate,
                   cluster: params.cluster, other: params.other, q: params.q, low: params.low,
                   page, size: params.size || 50 }),
  ]);
  const go = (changes) => { location.hash = link("facts", { ...params, page: 0, ...changes }); };
  const form = el("form", { class: "filters", id: "filters", onsubmit: (event) => {
    event.preventDefault();
    const f = event.target;
    const picked = FILTERS.map(([key]) => key).filter((key) => f.elements[`f-${key}`].checked);
    go({ run: f.elements.run.value, filters: picked.join(","),
         predicate: f.elements.predicate.value, cluster: f.elements.cluster.value,
         other: f.elements.other.value, q: f.elements.q.value.trim() });
  } },
    el("label", {}, "run ", el("select", { name: "run" }, runOptions(run))),
    FILTERS.map(([key, text]) => el("label", {},
      el("input", { type: "checkbox", name: `f-${key}`, checked: chosen.has(key) }), ` ${text}`)),
    el("label", {}, "predicate ", el("select", { name: "predicate" },
      el("option", { value: "" }, "any"),
      meta.predicates.map((p) => el("option", { value: p.predicate ?? "",
        selected: p.predicate === params.predicate }, `${p.predicate} (${fmt(p.facts)})`)))),
    el("label", {}, "error cluster ", el("select", { name: "cluster" },
      el("option", { value: "" }, meta.clusters.length ? "any" : "none loaded"),
      meta.clusters.map((c) => el("option", { value: c.cluster,
        selected: String(c.cluster) === String(params.cluster) },
        `${c.cluster}: ${c.label || (c.cluster === -1 ? "noise" : "")} (${fmt(c.facts)})`)))),
    el("label", {}, "disagrees with ", el("select", { name: "other" },
      el("option", { value: "" }, "—"), runOptions(params.other, run))),
    el("label", {}, "search ", el("input", { type: "search", name: "q", value: params.q || "",
                                             maxlength: 200 })),
    el("button", { type: "submit", id: "apply" }, "Apply"));
  const pages = Math.max(1, Math.ceil(data.total / data.size));
  const pager = el("div", { class: "pager" },
    el("button", { id: "prev", disabled: page <= 0,
                   onclick: () => { location.hash = link("facts", { ...params, page: page - 1 }); } },
       "← previous"),
    el("span", { id: "page-info" }, `page ${page + 1} of ${fmt(pages)} · ${fmt(data.total)} facts`),
    el("button", { id: "next", disabled: page + 1 >= pages,
                   onclick: () => { location.hash = link("facts", { ...params, page: page + 1 }); } },
       "next →"));
  const withOther = params.other !== undefined && params.other !== "";
  const head = ["fact", "subject", "predicate", "object", "verdict", "truth", "review",
                "confidence", "seconds", "error", "cluster", ...(withOther ? ["other run"] : [])];
  const rows = data.rows.map((r) => {
    const wrong = ["T", "F"].includes(r.label) && ["T", "F"].includes(r.truth) && r.label !== r.truth;
    return el("tr", { "data-fact-id": r.fact_id, class: wrong ? "wrong" : null },
      el("td", {}, el("a", { href: link("fact", { run, id: r.fact_id }) }, r.fact_id)),
      el("td", { class: "subject" }, r.subject), el("td", {}, r.predicate),
      el("td", { class: "object" }, r.object), labelCell(r.label), labelCell(r.truth),
      el("td", {}, r.review ?? ""), el("td", { class: "num" }, fmt(r.confidence, 2)),
      el("td", { class: "num" }, fmt(r.seconds, 2)), el("td", {}, r.error_type ?? ""),
      el("td", {}, r.cluster === null ? "" : `${r.cluster}${r.cluster_label ? ": " + r.cluster_label : ""}`),
      withOther ? labelCell(r.other_label) : null);
  });
  add(main, el("h2", {}, `Facts of ${RUNS.runs[run].name}`), form, pager,
    el("table", { id: "facts" }, el("thead", {}, el("tr", {}, head.map((h) => el("th", {}, h)))),
       el("tbody", {}, rows)),
    data.rows.length ? null : el("p", { class: "missing", id: "no-facts" }, "No fact matches."));
}

// -- one fact ---------------------------------------------------------------------------

function kv(pairs) {
  return el("dl", { class: "kv" }, pairs.filter(([, v]) => v !== undefined && v !== null && v !== "")
    .map(([k, v]) => [el("dt", {}, k), el("dd", {}, v instanceof Node ? v : fmt(v))]));
}

function json(value) { return el("pre", {}, JSON.stringify(value, null, 2)); }

function step(title, meta, ...body) {
  return el("li", { class: "step", "data-step": title },
    el("h3", {}, title), meta ? el("div", { class: "step-meta" }, meta) : null, ...body);
}

// Highlight the cited spans of a passage: <mark> elements around plain text nodes.
function highlighted(text, spans) {
  const node = el("span", {});
  const hits = [];
  for (const span of spans) {
    if (!span) continue;
    let at = text.indexOf(span);
    while (at !== -1) { hits.push([at, at + span.length]); at = text.indexOf(span, at + span.length); }
  }
  hits.sort((a, b) => a[0] - b[0]);
  let pos = 0;
  for (const [start, end] of hits) {
    if (start < pos) continue;
    node.append(text.slice(pos, start), el("mark", {}, text.slice(start, end)));
    pos = end;
  }
  node.append(text.slice(pos));
  return node;
}

function citationsOf(record) {
  const raw = record.citations ?? record.details?.citations ?? [];
  const spans = [], keys = new Set();
  for (const c of Array.isArray(raw) ? raw : []) {
    if (typeof c === "string") spans.push(c);
    else if (c && typeof c === "object") {
      if (c.text || c.quote || c.span) spans.push(c.text || c.quote || c.span);
      if (c.doc_id !== undefined) keys.add(`${c.doc_id}#${c.chunk_id ?? ""}`);
      if (c.doc_id !== undefined) keys.add(`${c.doc_id}#`);
    }
  }
  return { spans, keys, any: Array.isArray(raw) && raw.length > 0 };
}

function messageText(m) {
  if (typeof m === "string") return m;
  if (typeof m?.content === "string") return m.content;
  return JSON.stringify(m?.content ?? m, null, 2);
}

function timeline(fact) {
  const r = fact.record, d = r.details || {};
  const steps = [];
  steps.push(step("fact", `${fact.dataset ?? ""} · ${r.method ?? ""} · ${r.model ?? ""}`,
    kv([["subject", r.subject], ["predicate", r.predicate], ["object", r.object],
        ["fact id", r.fact_id], ["gold", r.gold], ["review", fact.review]])));
  if (d.sentence) steps.push(step("sentence", d.sentence_source, el("pre", {}, d.sentence)));
  if (Array.isArray(d.questions) && d.questions.length) {
    steps.push(step("questions", d.questions_source, el("ul", {}, d.questions.map((q) =>
      el("li", {}, `${typeof q === "string" ? q : q.text}`,
         typeof q === "object" ? el("span", { class: "step-meta" },
           ` (score ${fmt(q.score, 3)}${q.kept === false ? ", dropped" : ""})`) : null)))));
  }
  for (const call of Array.isArray(d.step_calls) ? d.step_calls : []) {
    steps.push(step(`step: ${call.step ?? "?"}`, call.fallback ? "fell back to a rule" : null,
      call.error ? el("pre", { class: "error" }, call.error) : null,
      call.raw ? el("pre", {}, call.raw) : null));
  }
  if (Array.isArray(d.evidence)) {
    const cites = citationsOf(r);
    steps.push(step("evidence", `${d.evidence.length} passage(s)` +
      (d.documents ? ` from ${d.documents.length} document(s)` : "") +
      (cites.any ? "" : " · this verdict records no citations"),
      d.evidence.length ? d.evidence.map((e) => {
        const cited = cites.keys.has(`${e.doc_id}#${e.chunk_id ?? ""}`) || cites.keys.has(`${e.doc_id}#`);
        return el("div", { class: `evidence${cited ? " cited" : ""}`, "data-doc": e.doc_id },
          el("div", { class: "step-meta" }, `${e.doc_id ?? ""} · chunk ${e.chunk_id ?? "?"}` +
            ` · similarity ${fmt(e.similarity, 2)}${cited ? " · cited" : ""}`),
          highlighted(String(e.text ?? ""), cites.spans));
      }) : el("p", { class: "missing" }, d.reason || "no evidence retrieved")));
  }
  const conversation = r.conversation ?? d.conversation;
  if (Array.isArray(conversation) && conversation.length) {
    conversation.forEach((m, i) => {
      const role = m?.role ?? m?.type ?? "message";
      const node = m?.node ? ` · node ${m.node}` : "";
      const title = role === "user" || role === "human"
        ? (i > 1 ? "re-prompt" : "prompt") : role === "assistant" || role === "ai" ? "answer" : role;
      steps.push(step(title, `${role}${node}`, el("pre", {}, messageText(m))));
    });
  } else {
    const raws = Array.isArray(r.raws) && r.raws.length ? r.raws : (r.raw ? [r.raw] : []);
    steps.push(step("prompt", null, el("p", { class: "missing" },
      "the prompt is not recorded in this verdict (runs that record a conversation show it here)")));
    raws.forEach((raw, i) => steps.push(step(i === 0 ? "raw answer" : `re-prompt ${i}: raw answer`,
      `attempt ${i + 1} of ${r.attempts ?? raws.length}`, el("pre", {}, raw ?? ""))));
  }
  if (Array.isArray(d.votes) && d.votes.length) {
    steps.push(step("votes", d.decision ? `decision: ${d.decision}` : null,
      el("table", { class: "votes" }, el("thead", {}, el("tr", {},
        ["model", "vote", "raw", "seconds", "tokens in/out"].map((h) => el("th", {}, h)))),
        el("tbody", {}, d.votes.map((v) => el("tr", {}, el("td", {}, v.model ?? ""),
          labelCell(v.label), el("td", {}, v.raw ?? ""), el("td", { class: "num" }, fmt(v.seconds, 2)),
          el("td", { class: "num" }, `${fmt(v.tokens_in)} / ${fmt(v.tokens_out)}`))))),
      d.counts ? kv(Object.entries(d.counts)) : null));
  }
  if (d.judge || d.judge_called !== undefined) {
    steps.push(step("judge", d.judge_called ? "called on a tie" : "not called",
      kv([["judge", d.judge], ["label", d.judge_label], ["raw", d.judge_raw],
          ["error", d.judge_error]])));
  }
  const explanation = r.explanation ?? d.explanation ?? fact.explanation;
  steps.push(step("verdict", null, kv([
    ["label", el("span", { class: `label-${r.label}`, id: "verdict-label" }, r.label)],
    ["truth", fact.truth], ["confidence", r.confidence ?? d.confidence],
    ["reason", r.reason ?? d.reason], ["explanation", explanation],
    ["error", r.error], ["error type", d.error_type], ["attempts", r.attempts],
    ["seconds", r.seconds], ["tokens in", r.tokens_in], ["tokens out", r.tokens_out],
    ["cluster", fact.cluster === null || fact.cluster === undefined ? null
      : `${fact.cluster}${fact.cluster_label ? ": " + fact.cluster_label : ""}`],
    ["category", fact.category], ["checked at", r.checked_at], ["run id", r.run_id]])));
  return el("ol", { class: "timeline", id: "timeline" }, steps);
}

async function renderFact(main, params) {
  const run = Number(params.run || 0);
  const fact = await api("fact", { run, id: params.id });
  const r = fact.record;
  const studioInput = { fact: { id: r.fact_id, dataset: fact.dataset ?? r.dataset ?? "",
    subject: r.subject, predicate: r.predicate, object: r.object } };
  add(main, 
    el("h2", {}, `Fact ${r.fact_id} in ${fact.name}`),
    el("p", {}, el("a", { href: link("facts", { run }) }, "← facts of this run"), " · ",
      el("a", { href: fact.studio, target: "_blank", rel: "noopener", id: "studio-link" },
         `open ${fact.strategy ?? "the graph"} in Studio`), " (input below) · ",
      fact.review_url ? [el("a", { href: fact.review_url, target: "_blank", rel: "noopener",
                                   id: "review-link" }, "the review page"), " · "] : null,
      "review it: ", el("code", { id: "review-command" }, fact.review_command)),
    fact.others.length ? el("p", { id: "others" }, "other runs: ", fact.others.map((o, i) => [
      i ? ", " : "", el("a", { href: link("fact", { run: o.run, id: r.fact_id }) }, o.name),
      " ", el("span", { class: `label-${o.label}` }, o.label)])) : null,
    timeline(fact),
    el("h3", {}, "input for Studio"), json(studioInput),
    el("details", {}, el("summary", {}, "the whole record"), json(r)));
}

// -- diff -------------------------------------------------------------------------------

async function renderDiff(main, params) {
  if (RUNS.runs.length < 2) {
    add(main, el("p", { class: "missing" }, "Open two runs or more to compare them: " +
      "kgcheck view RUN_A RUN_B"));
    return;
  }
  const a = Number(params.a ?? 0), b = Number(params.b ?? 1), page = Number(params.page || 0);
  const data = await api("diff", { a, b, all: params.all === "1" ? "true" : "", page });
  const m = data.mcnemar;
  const form = el("form", { class: "filters", id: "diff-form", onsubmit: (event) => {
    event.preventDefault();
    const f = event.target;
    location.hash = link("diff", { a: f.elements.a.value, b: f.elements.b.value,
                                   all: f.elements.all.checked ? "1" : "", page: 0 });
  } },
    el("label", {}, "run A ", el("select", { name: "a" }, runOptions(a))),
    el("label", {}, "run B ", el("select", { name: "b" }, runOptions(b))),
    el("label", {}, el("input", { type: "checkbox", name: "all", checked: params.all === "1" }),
       " every common fact (not only disagreements)"),
    el("button", { type: "submit" }, "Compare"));
  const pages = Math.max(1, Math.ceil(data.total / data.size));
  add(main, el("h2", {}, `${data.name_a} against ${data.name_b}`), form,
    el("p", { id: "mcnemar" },
      `${fmt(data.common)} facts in common, ${fmt(data.disagree)} with different verdicts. ` +
      `Of ${fmt(m.n)} labelled: both right ${fmt(m.table[0][0])}, only A ${fmt(m.only_a)}, ` +
      `only B ${fmt(m.only_b)}, neither ${fmt(m.table[1][1])}. ` +
      (m.p_value === null ? (m.missing || "No discordant pair: nothing to test.")
        : `McNemar's exact test: p = ${m.p_value.toPrecision(3)}.`)),
    el("div", { class: "pager" },
      el("button", { id: "prev", disabled: page <= 0,
        onclick: () => { location.hash = link("diff", { ...params, page: page - 1 }); } }, "← previous"),
      el("span", { id: "page-info" }, `page ${page + 1} of ${fmt(pages)} · ${fmt(data.total)} facts`),
      el("button", { id: "next", disabled: page + 1 >= pages,
        onclick: () => { location.hash = link("diff", { ...params, page: page + 1 }); } }, "next →")),
    el("table", { id: "diff" },
      el("thead", {}, el("tr", {}, ["fact", "subject", "predicate", "object", "A", "B", "truth",
        "seconds A", "seconds B"].map((h) => el("th", {}, h)))),
      el("tbody", {}, data.rows.map((r) => el("tr", { "data-fact-id": r.fact_id },
        el("td", {}, el("a", { href: link("fact", { run: a, id: r.fact_id }) }, r.fact_id)),
        el("td", {}, r.subject), el("td", {}, r.predicate), el("td", {}, r.object),
        labelCell(r.label_a), labelCell(r.label_b), labelCell(r.truth),
        el("td", { class: "num" }, fmt(r.seconds_a, 2)),
        el("td", { class: "num" }, fmt(r.seconds_b, 2)))))));
}

// -- routing ----------------------------------------------------------------------------

async function route() {
  const { view, params } = parseHash();
  const main = document.getElementById("main");
  for (const a of document.querySelectorAll("nav a")) {
    a.classList.toggle("current", a.id === `nav-${view}`);
  }
  status("");
  try {
    if (RUNS === null) RUNS = await api("runs");
    const fresh = el("div", {});
    if (view === "facts") await renderFacts(fresh, params);
    else if (view === "fact") await renderFact(fresh, params);
    else if (view === "diff") await renderDiff(fresh, params);
    else renderRuns(fresh);
    main.replaceChildren(fresh);
    done(["facts", "fact", "diff"].includes(view) ? view : "runs");
  } catch (err) {
    status(err.message);
    done("error");
  }
}

window.addEventListener("hashchange", route);
route();
