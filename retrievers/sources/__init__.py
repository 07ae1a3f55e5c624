"""Evidence sources for any KG: web search, page fetching, Wikipedia and a reference KG."""
