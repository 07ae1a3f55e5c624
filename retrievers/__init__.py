"""Evidence for RAG: corpus import, chunking, embeddings, the index, search and its HTTP API.

Modules: ``corpus`` (read the upstream ``rag_dataset`` layout from a folder or a tarball),
``store`` (the imported corpus in SQLite), ``chunking`` (sentence windows), ``lexical``
(BM25), ``embeddings`` (offline MiniLM and alternatives), ``index`` (Chroma or in-memory
chunk vectors), ``search`` (the mock search engine over stored results), ``selection``
(document selectors), ``evidence`` (the retrieval steps the RAG graph runs), ``api`` and
``client`` (the FactCheck-compatible HTTP API), ``tool`` (a LangChain tool).
"""
