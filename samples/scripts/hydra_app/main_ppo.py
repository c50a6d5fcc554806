"""A Hydra app with the shape of `python3 -m verl.trainer.main_ppo`, for capturing Hydra's own output.

Nothing here is verl. verl's entry point is a `@hydra.main` app; when Hydra cannot compose the config
(a config group option, a primary config or an override it cannot apply) it prints the error's bare
text and its epilogue before the app runs. When the app itself raises, Hydra prints the traceback.
This app prints its config and then checks one value, so that both can be captured:

    python main_ppo.py rollout=vllm_v2                # no such option in the `rollout` group
    python main_ppo.py --config-name ppo_trainer_v2   # no such primary config
    python main_ppo.py 'data.max_prompt_length=1,2]'  # an override Hydra cannot parse
    python main_ppo.py data.train_batch_size=7        # the app's own check raises (a traceback)
"""

import hydra
from omegaconf import OmegaConf


@hydra.main(config_path="conf", config_name="ppo_trainer", version_base=None)
def main(cfg):
    print(OmegaConf.to_yaml(cfg))
    if cfg.data.train_batch_size % 2:
        raise ValueError(f"data.train_batch_size ({cfg.data.train_batch_size}) must be divisible by 2")


if __name__ == "__main__":
    main()
