-- The contract's description of a table on its view ({view}: identifier, {text}: quoted literal).
COMMENT ON VIEW {view} IS {text}
