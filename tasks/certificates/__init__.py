"""Derivation certificates: the claim grammar and claim checks, certification of a DERIVATION
slot, and the gold derivations and gold traces that pass it."""

from faithgrpo.tasks.certificates.claim_checks import PROB_TOLERANCE, derivation_context
from faithgrpo.tasks.certificates.claims import Claim, parse_claim, parse_claims
from faithgrpo.tasks.certificates.derivation import DEFAULT_MAX_PATHS, DerivationReport, check_derivation
from faithgrpo.tasks.certificates.gold import GOLD_FORMAT, gold_trace
from faithgrpo.tasks.certificates.gold_derivations import MAX_LISTED_PATHS

__all__ = [
    "DEFAULT_MAX_PATHS",
    "GOLD_FORMAT",
    "MAX_LISTED_PATHS",
    "PROB_TOLERANCE",
    "Claim",
    "DerivationReport",
    "check_derivation",
    "derivation_context",
    "gold_trace",
    "parse_claim",
    "parse_claims",
]
