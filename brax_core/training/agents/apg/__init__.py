"""Analytic policy gradient (``brax.training.agents.apg`` counterpart): the policy follows the gradient of its
unrolled return, taken through the differentiable MJX physics."""
