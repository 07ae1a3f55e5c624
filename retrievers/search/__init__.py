"""The mock search engine over an evidence corpus, its HTTP server, client and LangChain tool."""
