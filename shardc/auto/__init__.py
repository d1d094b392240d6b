"""Automatic sharding (issue 19): the cost model the search uses, from the IR and the
factor rules alone (costmodel: compute and communication; memory: peak per device)."""
