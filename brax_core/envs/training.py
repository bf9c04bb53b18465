"""Training wrappers (``brax.envs.training`` counterpart); see ``brax_core.envs.wrappers.training``."""

from brax_core.envs.wrappers.training import (  # noqa: F401
    AutoResetWrapper,
    DomainRandomizationVmapWrapper,
    EpisodeWrapper,
    EvalMetrics,
    EvalWrapper,
    VmapWrapper,
    select_envs,
    wrap,
)
