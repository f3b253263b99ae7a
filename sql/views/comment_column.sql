-- The contract's description (and unit) of a column on its view.
COMMENT ON COLUMN {view}.{column} IS {text}
