"""Stage 4, lowering: StableHLO text with Shardy (sdy) shardings from a propagated Program."""
