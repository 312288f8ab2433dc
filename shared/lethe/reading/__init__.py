"""Reading: scan planning, pruning, pinned reads of data files and the filter grammars."""
