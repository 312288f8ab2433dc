"""What storage says about a table: receipts of erasure requests, the retained evidence, ``lethe verify`` and the table report."""
