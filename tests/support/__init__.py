"""What the tests share: reference simulators, test backends, statistics and sample runs."""
