"""The sparql evidence source against a real Virtuoso, with the client set both ways.

The source's default (kgcheck's ``SparqlClient`` under the evidence policy's limits) and a
``SparqlClient`` passed in as the ``select`` callable must read the same statements.
"""

from __future__ import annotations

import pytest

from kgcheck.data.sparql import SparqlClient
from kgcheck.retrievers.sources.base import EVIDENCE_SOURCES, EvidenceRequest, SourceSettings
from kgcheck.retrievers.sources.net import NetPolicy
from kgcheck.retrievers.sources.sparql import SparqlSource, http_select
from tests.support.virtuoso import Virtuoso, load

GRAPH = "http://kgcheck.test/evidence"
KG = """
<http://kg.example/Alan_Alda> <http://www.w3.org/2000/01/rdf-schema#label> "Alan Alda"@en .
<http://kg.example/Alan_Alda> <http://www.w3.org/2000/01/rdf-schema#label> "Alan Alda"@fr .
<http://kg.example/Alan_Alda> <http://kg.example/spouse> <http://kg.example/Arlene_Alda> .
<http://kg.example/Alan_Alda> <http://kg.example/birthPlace> <http://kg.example/New_York_City> .
<http://kg.example/Arlene_Alda> <http://www.w3.org/2000/01/rdf-schema#label> "Arlene Alda"@en .
<http://kg.example/Arlene_Alda> <http://kg.example/occupation> "photographer" .
<http://kg.example/New_York_City> <http://www.w3.org/2000/01/rdf-schema#label> "New York City"@en .
"""


@pytest.fixture(scope="module")
def endpoint(virtuoso: Virtuoso, tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("evidence") / "alda.nt"
    path.write_text(KG.strip() + "\n")
    load(virtuoso, path, GRAPH)
    return virtuoso.url


def request() -> EvidenceRequest:
    return EvidenceRequest(dataset="mine", fact_id="1", subject="http://kg.example/Alan_Alda",
                           predicate="http://kg.example/spouse", object="Arlene Alda",
                           readable=("Alan Alda", "spouse", "Arlene Alda"), queries=())


@pytest.mark.parametrize("client", ["policy", "SparqlClient"])
async def test_virtuoso_statements_become_sentences(endpoint, client):
    select = (http_select(endpoint, NetPolicy(timeout=30)) if client == "policy"
              else SparqlClient(endpoint).select)
    source = EVIDENCE_SOURCES.get("sparql")("", settings=SourceSettings(), select=select)
    assert isinstance(source, SparqlSource)
    found = [f for k in source.keys(request(), []) for f in await source.fetch(k)]
    by_url = {f.url: f for f in found}
    assert set(by_url) == {"http://kg.example/Alan_Alda", "http://kg.example/Arlene_Alda"}
    alan = by_url["http://kg.example/Alan_Alda"]
    assert alan.title == "Alan Alda"
    assert set(alan.text.splitlines()) == {"Alan Alda spouse Arlene Alda.",
                                           "Alan Alda birth place New York City."}
    assert by_url["http://kg.example/Arlene_Alda"].text == "Arlene Alda occupation photographer."


async def test_a_failing_client_is_a_source_error(free_port):
    from kgcheck.retrievers.sources.base import SourceError

    gone = SparqlClient(f"http://127.0.0.1:{free_port}/sparql", retries=0, timeout=2).select
    source = SparqlSource(gone, f"http://127.0.0.1:{free_port}/sparql")
    with pytest.raises(SourceError, match=f"sparql at http://127.0.0.1:{free_port}/sparql"):
        await source.fetch("http://kg.example/Alan_Alda")
