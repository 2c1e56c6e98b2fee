"""searchplay.launch: the command a stage runs itself under when ``pipeline.launch.processes`` > 1."""

from searchplay.config import LaunchConfig
from searchplay.launch import launch_command, needs_launch


def test_the_launcher_is_accelerate_with_a_config_and_torchrun_without():
    accelerate = launch_command(LaunchConfig(processes=8, config="accelerate_configs/fsdp.yaml"), ["selfplay", "-v"])
    assert accelerate[0].endswith("accelerate") and accelerate[1:] == [
        "launch", "--config_file", "accelerate_configs/fsdp.yaml", "--num_processes", "8", "-m", "searchplay",
        "selfplay", "-v"]
    torchrun = launch_command(LaunchConfig(processes=2), ["selfplay"])
    assert torchrun[0].endswith("torchrun") and torchrun[1:] == ["--standalone", "--nproc_per_node", "2", "-m",
                                                                 "searchplay", "selfplay"]


def test_only_a_process_no_launcher_started_launches(monkeypatch):
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    assert not needs_launch(LaunchConfig())
    assert needs_launch(LaunchConfig(processes=2))
    monkeypatch.setenv("LOCAL_RANK", "1")
    assert not needs_launch(LaunchConfig(processes=2))
