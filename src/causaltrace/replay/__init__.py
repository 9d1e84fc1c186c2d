"""Replay: re-run a recorded team with a corrected step (CausalFlow), repair it, collect repair pairs."""
