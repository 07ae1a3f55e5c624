"""Any dataset in FactCheck's layout runs through ``--data``, its names made readable."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatResult
from typer.testing import CliRunner

from kgcheck.cli import app
from kgcheck.data.facts import readable_term
from tests.support.scripted import SCRIPTED, register_scripted

runner = CliRunner()
# A KG in three spellings: NELL-style prefixed names, IRIs with namespaces, CURIEs.
KG = {
    "nell_1": ["concept:athlete:michael_jordan", "concept:athletePlaysForTeam",
               "concept:sportsteam:chicago_bulls"],
    "iri_2": ["http://example.org/kb/Ada_Lovelace", "http://example.org/onto#birthPlace",
              "http://example.org/kb/London"],
    "curie_3": ["ex:Marie_Curie", "ex:wonPrize", "ex:Nobel_Prize_in_Chemistry"],
    "curie_4": ["ex:Marie_Curie", "ex:hasSpouse", "ex:Albert_Einstein"],
}
GOLD = {"nell_1": 1, "iri_2": 1, "curie_3": 1, "curie_4": 0}
READABLE = ["michael jordan", "athlete plays for team", "chicago bulls", "Ada Lovelace",
            "birth place", "London", "Marie Curie", "won prize", "Nobel Prize in Chemistry",
            "has spouse", "Albert Einstein"]
RAW_SPELLINGS = ["concept:", "http://example.org", "ex:", "_"]
PROMPTS: list[str] = []


class RecordingModel(GenericFakeChatModel):
    """Answer from a script and keep the text of every prompt it was sent."""

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        PROMPTS.append("\n".join(str(m.content) for m in messages))
        return super()._generate(messages, stop=stop, run_manager=run_manager, **kwargs)


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "clone" / "dataset" / "NELLish" / "data"
    folder.mkdir(parents=True)
    (folder / "kg.json").write_text(json.dumps(KG))
    (folder / "gt.json").write_text(json.dumps(GOLD))
    return tmp_path / "clone"


@pytest.fixture
def recording() -> Iterator[str]:
    PROMPTS.clear()
    answers = iter([AIMessage(content=a) for a in ["T", "T", "T", "F"] * 2])
    register_scripted("recording", lambda: RecordingModel(messages=answers))
    yield "scripted:recording"
    SCRIPTED.pop("recording", None)


def test_datasets_lists_a_new_dataset_with_its_size_and_gold_accuracy(data_dir: Path) -> None:
    result = runner.invoke(app, ["datasets", "--data", str(data_dir)])
    assert result.exit_code == 0, result.output
    row = next(line for line in result.output.splitlines() if "NELLish" in line)
    cells = [c.strip() for c in row.strip("│ ").split("│")]
    assert cells == ["NELLish", "4", "4", "0.75", "0"]
    assert "gold accuracy" in result.output


@pytest.mark.parametrize("method", ["dka", "giv-f"])
def test_a_new_dataset_runs_with_readable_names_in_the_prompts(
        data_dir: Path, tmp_path: Path, recording: str, method: str) -> None:
    out = tmp_path / "run"
    result = runner.invoke(app, ["run", "--data", str(data_dir), "--dataset", "nellish",
                                 "--method", method, "--model", recording,
                                 "--concurrency", "1", "--out", str(out), "--no-progress"])
    assert result.exit_code == 0, result.output
    assert len(PROMPTS) == 4
    for fact_prompt, (subject, predicate, obj) in zip(PROMPTS, KG.values(), strict=True):
        for term in (subject, predicate, obj):
            assert readable_term(term) in fact_prompt
    text = "\n".join(PROMPTS)
    for name in READABLE:
        assert name in text
    for spelling in RAW_SPELLINGS:
        # Only the examples may hold underscores or prefixes; the facts' lines do not.
        assert all(spelling not in line for line in text.splitlines()
                   if any(name in line for name in READABLE)), spelling
    summary = json.loads((out / "summary.json").read_text())
    assert summary["dataset"] == "NELLish" and summary["n"] == 4
    assert summary["accuracy"] == pytest.approx(1.0)
    notice = "no worked examples in the vocabulary of NELLish"
    assert (notice in result.output) == (method == "giv-f")
    if method == "giv-f":
        # The KG-independent examples were sent instead.
        assert "Monica Bellucci" in text


@pytest.mark.parametrize(("raw", "readable"), [
    ("concept:athletePlaysForTeam", "athlete plays for team"),
    ("concept:city:new_york", "new york"),
    ("dbo:birthPlace", "birth place"),
    ("<http://example.org/kb/Caf%C3%A9_de_Flore>", "Café de Flore"),
    ("http://example.org/onto#hasCapital", "has capital"),
    ("/people/person/place_of_birth", "place of birth"),
    ("ns:people.person.place_of_birth", "place of birth"),
    ("Paris:France", "Paris:France"),  # a name, not a prefix
    ("Star Wars: A New Hope", "Star Wars: A New Hope"),
    ("12:30", "12:30"),
    ("J.R.R._Tolkien", "J.R.R. Tolkien"),
])
def test_names_are_readable_whatever_the_kg_spelling(raw: str, readable: str) -> None:
    assert readable_term(raw) == readable

