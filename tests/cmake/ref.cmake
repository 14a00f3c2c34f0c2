# Reference backend: graph construction checks and finite-difference gradient checks.
so_add_test(test_graph LABELS unit TIMEOUT 300)
so_add_test(test_gradcheck LABELS unit TIMEOUT 300)
