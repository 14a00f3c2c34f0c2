# oneDNN backend: agreement with the ref backend and finite-difference gradient checks.
so_add_test(test_onednn LABELS unit TIMEOUT 300)
