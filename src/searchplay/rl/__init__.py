"""RL for search self-play: advantages (GRPO, REINFORCE, SAPO), clipped policy loss with low-variance KL,
and ``PolicyTrainer`` (accelerate: CPU, one GPU or FSDP). torch is imported only by the trainer and losses."""

from searchplay.rl.advantages import (
    ADVANTAGE_ESTIMATORS,
    AdvantageFn,
    broadcast_steps_to_tokens,
    broadcast_to_tokens,
    gdcr_step_advantages,
    get_advantage_estimator,
    group_advantages,
    register_advantage_estimator,
    reinforce_advantages,
    sapo_advantages,
)
from searchplay.rl.sample import TrainingSample

__all__ = [
    "ADVANTAGE_ESTIMATORS",
    "AdvantageFn",
    "PolicyTrainer",
    "TrainingSample",
    "broadcast_steps_to_tokens",
    "broadcast_to_tokens",
    "gdcr_step_advantages",
    "get_advantage_estimator",
    "group_advantages",
    "register_advantage_estimator",
    "reinforce_advantages",
    "sapo_advantages",
]


def __getattr__(name: str):
    # PolicyTrainer lives in trainer.py, which imports torch lazily; keep `import searchplay.rl` light.
    if name == "PolicyTrainer":
        from searchplay.rl import trainer

        return getattr(trainer, name)
    raise AttributeError(f"module 'searchplay.rl' has no attribute {name!r}")
