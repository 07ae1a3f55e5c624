"""The error analysis: a scripted model explains errors in three known families.

The run's wrong verdicts fall into three families by predicate (places confused, genres
confused, partners taken for spouses); the scripted model explains each in its family's
words, varied per fact, and sorts each explanation into the study's E1-E6. Embedded by
MiniLM (offline), reduced by UMAP and clustered by HDBSCAN, the clusters must recover the
families (adjusted Rand index, scikit-learn's), the taxonomy must fill Table 9's layout,
and the same seed must give the same clusters. A second analysis resumes from the
explanations the first obtained, asking the model nothing.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult

from kgcheck.evals.errors.outputs import ErrorsInputError, read_errors
from kgcheck.evals.errors.pipeline import analyse_errors
from kgcheck.evals.errors.tables import category_table, corruption_type
from tests.support.scripted import register_scripted

FAMILIES = {
    "birthPlace": ("geo", "E4"),
    "genre": ("genre", "E5"),
    "spouse": ("partner", "E2"),
}
PLACES = ["Lyon", "Porto", "Graz", "Turin", "Leeds", "Bruges", "Gdansk", "Malmo", "Basel",
          "Nantes", "Bergen", "Split"]
GENRES = ["jazz", "folk", "metal", "blues", "techno", "soul", "reggae", "punk", "opera",
          "ambient", "gospel", "funk"]
TEXTS = {
    "geo": [
        "I confused the birthplace {x} with a neighbouring city in the same country; the "
        "person was born in a different town nearby.",
        "I mixed up the city of birth: {x} is close to where the person was born, and I "
        "took the nearby town for the birthplace.",
        "The birthplace is a different city than {x}; I confused two towns of the same "
        "region and country.",
    ],
    "genre": [
        "I classified the album as {x} music, but its genre is another style; genre labels "
        "of albums overlap.",
        "I put the record in the wrong musical genre: {x} is a related style, not the "
        "album's genre.",
        "The album's genre is not {x}; I confused two musical styles that sound alike.",
    ],
    "partner": [
        "I took a business partner for a spouse; the two people worked together for years "
        "but were never married.",
        "The two were colleagues and co-founders, not husband and wife; I confused a work "
        "partnership with a marriage.",
        "I mistook a long professional collaboration for a marriage; they were partners in "
        "a company, not spouses.",
    ],
}
PER_FAMILY = 12
CALLS: list[str] = []


# The prompt shows readable terms: "birth place", "Subject 5".
READABLE = {"birthPlace": "birth place", "genre": "genre", "spouse": "spouse"}


def _family(text: str) -> str:
    for predicate, (family, _) in FAMILIES.items():
        if f'"{READABLE[predicate]}"' in text:
            return family
    raise AssertionError(f"no family in {text!r}")


class FamilyExplainer(BaseChatModel):
    """Explain an error in its family's words; sort an explanation into E1-E6."""

    @property
    def _llm_type(self) -> str:
        return "family-explainer"

    def _generate(self, messages: list[BaseMessage], stop: Any = None,
                  run_manager: Any = None, **kwargs: Any) -> ChatResult:
        system = str(messages[0].content)
        data = str(messages[-1].content)
        if system.startswith("Assign the explanation"):
            CALLS.append("categorize")
            words = data.lower()
            code = ("E4" if "birth" in words else "E5" if "genre" in words or "musical" in words
                    else "E2" if "partner" in words or "married" in words else "E1")
            text = f"Category: {code}"
        elif system.startswith("These are explanations"):
            CALLS.append("name")
            text = "Named cluster"
        else:
            CALLS.append("explain")
            family = _family(data)
            n = int(data.split("Subject ")[1].split('"')[0])
            pool = PLACES if family == "geo" else GENRES
            text = TEXTS[family][n % 3].format(x=pool[n % len(pool)])
        return ChatResult(generations=[ChatGeneration(message=AIMessage(text))])


register_scripted("families", FamilyExplainer)


def make_error_run(folder: Path, *, model: str = "scripted:families",
                   carried: int = 0, gold: bool = True) -> Path:
    """Three families of PER_FAMILY wrong verdicts each, and as many right ones."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "run.json").write_text(json.dumps({
        "dataset": "FactBench", "strategy": "dka", "method": "DKA", "models": [model],
        "source": "memory", "run_id": "err0001"}))
    lines = []
    n = 0
    for predicate in FAMILIES:
        for k in range(2 * PER_FAMILY):
            wrong = k < PER_FAMILY
            kind = "correct" if k % 2 == 0 else "wrong_mix_range"
            record = {"fact_id": f"{kind}_{predicate}_{n:05d}", "label": "F" if k % 2 == 0
                      else "T", "method": "DKA", "model": model, "raw": "T",
                      "details": {}, "dataset": "FactBench", "subject": f"Subject_{n}",
                      "predicate": predicate, "object": f"Object_{n}"}
            truth = ("T" if k % 2 == 0 else "F") if wrong else record["label"]
            if gold:
                record["gold"] = truth
            if wrong and carried and k < carried:
                record["explanation"] = TEXTS[FAMILIES[predicate][0]][n % 3].format(
                    x=(PLACES if predicate == "birthPlace" else GENRES)[n % 12])
            lines.append(json.dumps(record))
            n += 1
    (folder / "verdicts.jsonl").write_text("\n".join(lines) + "\n")
    return folder


def _family_of(record: dict) -> str:
    return FAMILIES[record["predicate"]][0]


@pytest.fixture(scope="module")
def analysed(tmp_path_factory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("errors")
    run = make_error_run(root / "run", carried=2)
    CALLS.clear()
    first = analyse_errors([run], root / "out", taxonomy=True, seed=7, min_cluster_size=4)
    calls = list(CALLS)
    return {"root": root, "run": run, "first": first, "calls": calls}


def test_clusters_recover_the_families(analysed) -> None:
    from sklearn.metrics import adjusted_rand_score

    records = analysed["first"].records
    assert len(records) == 3 * PER_FAMILY
    families = [_family_of(r) for r in records]
    clusters = [r["cluster"] for r in records]
    ari = adjusted_rand_score(families, clusters)
    # Measured 1.0 on this machine (MiniLM int8, umap-learn 0.5.12, seed 7).
    assert ari >= 0.9, (ari, list(zip(families, clusters, strict=True)))
    assert all(c >= 0 for c in clusters)  # noise would be -1
    labels = {r["cluster"]: r["cluster_label"] for r in records}
    words = " ".join(labels.values())
    assert any(w in words for w in ("birthplace", "city", "town", "born"))
    assert any(w in words for w in ("genre", "album", "musical", "style"))
    assert any(w in words for w in ("partner", "married", "marriage", "spouse"))


def test_explanations_carried_by_verdicts_are_reused(analysed) -> None:
    records = analysed["first"].records
    reused = [r for r in records if r["explanation_source"] == "verdict"]
    assert len(reused) == 3 * 2
    # One call per error that carried none, one categorize call per error.
    assert analysed["calls"].count("explain") == 3 * (PER_FAMILY - 2)
    assert analysed["calls"].count("categorize") == 3 * PER_FAMILY


def test_taxonomy_fills_table_9(analysed) -> None:
    out = analysed["root"] / "out"
    table9 = json.loads((out / "tables.json").read_text())["table9"]
    by_code = {r["category"]: r for r in table9}
    assert list(by_code) == ["E1", "E2", "E3", "E4", "E5", "E6"]  # every category, in order
    assert by_code["E4"]["counts"] == {"scripted:families": PER_FAMILY}
    assert by_code["E5"]["total"] == by_code["E2"]["total"] == PER_FAMILY
    assert by_code["E1"]["total"] == 0 and by_code["E1"]["unique_ratio"] is None
    assert by_code["E4"]["unique_ratio"] == 1.0
    md = (out / "tables.md").read_text()
    assert "## Table 9: error categories, FactBench" in md
    assert "| E4 Geographic / nationality | 12 | 12 | 1.00 |" in md


def test_outputs_and_slices(analysed) -> None:
    out = analysed["root"] / "out"
    records = read_errors(out)
    assert {"run", "fact_id", "explanation", "cluster", "cluster_label", "category"} <= \
        set(records[0])
    clusters = json.loads((out / "clusters.json").read_text())
    assert sum(c["size"] for c in clusters["clusters"]) == len(records)
    assert clusters["settings"]["umap"]["random_state"] == 7
    assert (out / "umap.png").read_bytes()[:4] == b"\x89PNG"
    slices = json.loads((out / "tables.json").read_text())["slices"][0]
    by_type = {r["corruption"]: r for r in slices["by_corruption"]}
    assert by_type["correct"]["facts"] == by_type["wrong_mix_range"]["facts"] == 36
    assert by_type["correct"]["errors"] == 18
    assert {r["predicate"]: r["error_rate"] for r in slices["by_predicate"]} == \
        {p: 0.5 for p in FAMILIES}
    assert slices["by_degree"] == []  # the facts were given in memory: no input KG


def test_same_seed_same_clusters_and_resume(analysed) -> None:
    root, run = analysed["root"], analysed["run"]
    CALLS.clear()
    again = analyse_errors([run], root / "out", taxonomy=True, seed=7, min_cluster_size=4)
    assert CALLS == []  # every explanation and category came from explanations.jsonl
    assert [r["cluster"] for r in again.records] == \
        [r["cluster"] for r in analysed["first"].records]
    fresh = analyse_errors([run], root / "fresh", taxonomy=True, seed=7, min_cluster_size=4)
    assert [r["cluster"] for r in fresh.records] == \
        [r["cluster"] for r in analysed["first"].records]


def test_a_stopped_analysis_asks_only_for_what_is_missing(tmp_path: Path) -> None:
    run = make_error_run(tmp_path / "run")
    out = tmp_path / "out"
    analyse_errors([run], out, seed=1, min_cluster_size=4)
    lines = (out / "explanations.jsonl").read_text().splitlines()
    # Keep 20 of 36 explanations and a torn line, as a kill -9 would leave them.
    (out / "explanations.jsonl").write_text("\n".join(lines[:20]) + "\n" + lines[20][:15])
    CALLS.clear()
    analyse_errors([run], out, seed=1, min_cluster_size=4)
    assert CALLS.count("explain") == 16


def test_cap_samples_errors_with_the_seed(tmp_path: Path) -> None:
    from kgcheck.evals.errors.selection import read_run_errors

    run = make_error_run(tmp_path / "run")
    a = read_run_errors([run], cap=10, seed=3)[0]
    b = read_run_errors([run], cap=10, seed=3)[0]
    c = read_run_errors([run], cap=10, seed=4)[0]
    assert len(a.errors) == 10 and a.total_errors == 36
    assert [e["fact_id"] for e in a.errors] == [e["fact_id"] for e in b.errors]
    assert [e["fact_id"] for e in a.errors] != [e["fact_id"] for e in c.errors]


def test_review_labels_overrule_gold(tmp_path: Path) -> None:
    from kgcheck.evals.errors.selection import read_run_errors

    run = make_error_run(tmp_path / "run", gold=False)
    (run / "labels.csv").write_text("fact_id,label,note,reviewer,reviewed_at\n"
                                    "correct_birthPlace_00000,T,,ana,2026-01-01T00:00:00Z\n")
    found = read_run_errors([run])[0]
    assert [e["fact_id"] for e in found.errors] == ["correct_birthPlace_00000"]
    # The run holds no gold label: every truth is the review's, and the report says so.
    assert found.truth_from == "review labels"


def test_unique_ratio_counts_facts_shared_by_models() -> None:
    records = [{"dataset": "D", "model": m, "fact_id": f, "category": "E1"}
               for m, f in (("a", "1"), ("b", "1"), ("a", "2"), ("b", "3"))]
    rows = category_table(records, {"E1": "Missing context"})
    assert rows == [{"dataset": "D", "category": "E1", "name": "Missing context",
                     "counts": {"a": 2, "b": 2}, "total": 4, "distinct_facts": 3,
                     "unique_ratio": 0.75}]


def test_corruption_types_from_fact_ids() -> None:
    assert corruption_type("correct_award_00001", "award") == "correct"
    assert corruption_type("wrong_mix_domain_award_00003", "award") == "wrong_mix_domain"
    assert corruption_type("wrong_mix_domainrange_birth_00003", "birth") == \
        "wrong_mix_domainrange"
    assert corruption_type("Q42", "P31") is None


def test_replay_model_has_no_explanations(tmp_path: Path) -> None:
    run = make_error_run(tmp_path / "run", model="replay:gemma2:9b")
    with pytest.raises(ErrorsInputError, match="replays recorded verdicts and has no "
                                               "explanations.*local:"):
        analyse_errors([run], tmp_path / "out")


def _cli(*args: str) -> subprocess.CompletedProcess:
    kgcheck = Path(sys.executable).parent / "kgcheck"
    return subprocess.run([str(kgcheck), "errors", *args], capture_output=True, text=True,
                          timeout=300)


@pytest.mark.parametrize("case", ["not a run", "no gold", "no errors", "replay",
                                  "embedder"])
def test_bad_input_gets_one_line(tmp_path: Path, case: str) -> None:
    out = str(tmp_path / "out")
    if case == "not a run":
        done, expect = _cli(str(tmp_path), "--out", out), "is not a kgcheck run folder"
    elif case == "no gold":
        run = make_error_run(tmp_path / "run", gold=False)
        done, expect = _cli(str(run), "--out", out), "no gold labels and no review labels"
    elif case == "no errors":
        run = make_error_run(tmp_path / "run")
        lines = [json.loads(x) for x in (run / "verdicts.jsonl").read_text().splitlines()]
        (run / "verdicts.jsonl").write_text("".join(
            json.dumps({**r, "gold": r["label"]}) + "\n" for r in lines))
        done, expect = _cli(str(run), "--out", out), "no errors to analyse"
    elif case == "replay":
        run = make_error_run(tmp_path / "run", model="replay:gemma2:9b")
        done, expect = _cli(str(run), "--out", out), "pass --model with a live model"
    else:
        # The verdicts explain themselves (no model call), so the embedder is reached.
        run = make_error_run(tmp_path / "run", model="replay:gemma2:9b", carried=PER_FAMILY)
        done = _cli(str(run), "--out", out, "--embedder", "hf:BAAI/bge-small-en-v1.5")
        expect = "needs sentence-transformers"
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and expect in lines[0], done.stderr


def test_the_cli_explains_errors_over_the_openai_protocol(tmp_path: Path) -> None:
    """`kgcheck errors` end to end against a stub OpenAI-compatible server on loopback."""
    import os

    from tests.support.stubs import Behaviour, OpenAIStub

    explanation = "I confused the birthplace with a nearby city of the same country."
    run = make_error_run(tmp_path / "run", model="ollama:unused", carried=6)
    out = tmp_path / "out"
    with OpenAIStub(Behaviour(answer=explanation, tokens_in=80, tokens_out=14)) as stub:
        env = {k: v for k, v in os.environ.items()
               if k not in ("OPENAI_API_KEY", "OPENAI_API_BASE")}
        env["OPENAI_BASE_URL"] = stub.url
        kgcheck = Path(sys.executable).parent / "kgcheck"
        done = subprocess.run(
            [str(kgcheck), "errors", str(run), "--out", str(out), "--model",
             "openai-compatible:stub-model", "--min-cluster-size", "4"],
            capture_output=True, text=True, timeout=300, env=env)
        calls = len(stub.calls())
    assert done.returncode == 0, done.stderr
    assert calls == 3 * (PER_FAMILY - 6)  # one per error that carried no explanation
    records = read_errors(out)
    assert len(records) == 3 * PER_FAMILY
    asked = [r for r in records if r["explanation_source"] == "model"]
    assert len(asked) == calls and {r["explanation"] for r in asked} == {explanation}
    assert "36 explanations in" in done.stdout


@pytest.mark.slow
def test_the_cli_explains_errors_with_the_local_model(tmp_path: Path) -> None:
    """`kgcheck errors` on a real model: llama.cpp (xllamacpp) serving SmolLM2-135M.

    The model is tiny: its explanations prove the path (prompt, call, resume), not their
    quality. Most errors carry explanations, so the clusters have something to find.
    """
    pytest.importorskip("xllamacpp")
    import os

    run = make_error_run(tmp_path / "run", model="local:smollm2-135m", carried=PER_FAMILY - 2)
    out = tmp_path / "out"
    kgcheck = Path(sys.executable).parent / "kgcheck"
    args = [str(kgcheck), "errors", str(run), "--out", str(out), "--max-tokens", "40",
            "--temperature", "0", "--min-cluster-size", "4", "--concurrency", "2"]
    env = {**os.environ, "OMP_WAIT_POLICY": "passive"}
    done = subprocess.run(args, capture_output=True, text=True, timeout=900, env=env)
    assert done.returncode == 0, done.stderr
    records = read_errors(out)
    asked = [r for r in records if r["explanation_source"] == "model"]
    assert len(records) == 3 * PER_FAMILY and len(asked) == 3 * 2
    assert all(r["model"] == "local:smollm2-135m" and r["explanation"] for r in asked)
    # Again: every explanation comes from explanations.jsonl, no model call is made.
    lines = (out / "explanations.jsonl").read_text().count("\n")
    again = subprocess.run(args, capture_output=True, text=True, timeout=900, env=env)
    assert again.returncode == 0, again.stderr
    assert (out / "explanations.jsonl").read_text().count("\n") == lines


def test_slices_by_subject_degree_in_the_input_kg(tmp_path: Path) -> None:
    from kgcheck.evals.errors.selection import read_run_errors
    from kgcheck.evals.errors.tables import error_slices

    run = make_error_run(tmp_path / "run")
    rows = [json.loads(x) for x in (run / "verdicts.jsonl").read_text().splitlines()]
    # The input KG: the run's facts, and four more about Subject_0 (degree 5 in all).
    triples = tmp_path / "kg.csv"
    lines = ["id,subject,predicate,object"] + [
        f"{r['fact_id']},{r['subject']},{r['predicate']},{r['object']}" for r in rows]
    lines += [f"extra{k},Subject_0,knows,Someone_{k}" for k in range(4)]
    triples.write_text("\n".join(lines) + "\n")
    info = json.loads((run / "run.json").read_text())
    (run / "run.json").write_text(json.dumps({**info, "source": str(triples)}))
    found = read_run_errors([run])[0]
    from kgcheck.evals.errors.pipeline import _degrees

    slices = error_slices(found.name, found.scored, _degrees(found))
    by_degree = {r["degree"]: r for r in slices["by_degree"]}
    assert by_degree["4-10"]["facts"] == 1 and by_degree["4-10"]["errors"] == 1  # Subject_0
    assert by_degree["1"]["facts"] == 3 * 2 * PER_FAMILY - 1


def test_clusters_named_by_the_model(tmp_path: Path) -> None:
    run = make_error_run(tmp_path / "run", carried=PER_FAMILY)
    CALLS.clear()
    done = analyse_errors([run], tmp_path / "out", seed=7, min_cluster_size=4,
                          name_with_model=True, model="scripted:families")
    assert CALLS.count("name") == done.summary["clusters"] == 3
    assert {r["cluster_label"] for r in done.records} == {"Named cluster"}
    assert done.summary["named_by"] == "model scripted:families"
