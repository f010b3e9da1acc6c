"""Model configs and backends (torch, megatron) chosen by name; see nemo_rl.models.build."""
