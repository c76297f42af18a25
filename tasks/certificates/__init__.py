"""Gold derivations and gold traces: for every problem a DERIVATION that the verifier's certificate
check (:mod:`faithgrpo.verifier.certificates`) passes, in the six-slot trace the prompts show."""

from faithgrpo.tasks.certificates.gold import GOLD_FORMAT, gold_trace
from faithgrpo.tasks.certificates.gold_derivations import MAX_LISTED_PATHS

__all__ = ["GOLD_FORMAT", "MAX_LISTED_PATHS", "gold_trace"]
