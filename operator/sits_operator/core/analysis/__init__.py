"""The pure SLI decision engine: samples and state in, verdicts and a Decision out.

No I/O and no clock: the handler passes `now`, the observations and the weights it read
back from the traffic router, and applies what `decide` returns (docs/architecture.md section 5).
"""

from sits_operator.core.analysis.decide import decide
from sits_operator.core.analysis.verdicts import assess
from sits_operator.core.analysis.weights import step_weights_for, weights_for

__all__ = ["assess", "decide", "step_weights_for", "weights_for"]
