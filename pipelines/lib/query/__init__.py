"""Query: SQL in sql/ files, the canned analyst queries, the analyst catalog (views only) and its shell."""
