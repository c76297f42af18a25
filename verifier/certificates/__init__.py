"""Derivation certificates: the DERIVATION claim grammar (``claims``), the index of what a claim
is about (``claim_index``), each claim's truth on a problem (``claim_checks``) and the certification
of a whole DERIVATION slot (``derivation``)."""

from faithgrpo.verifier.certificates.claim_checks import PROB_TOLERANCE, derivation_context
from faithgrpo.verifier.certificates.claims import Claim, parse_claim, parse_claims
from faithgrpo.verifier.certificates.derivation import DEFAULT_MAX_PATHS, DerivationReport, check_derivation

__all__ = [
    "DEFAULT_MAX_PATHS",
    "PROB_TOLERANCE",
    "Claim",
    "DerivationReport",
    "check_derivation",
    "derivation_context",
    "parse_claim",
    "parse_claims",
]
