"""hetlb on real HTTP traffic: the dispatcher, the model's test backends, a load generator and the testbed."""
