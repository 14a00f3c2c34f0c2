# The scaling predictor's measurement arithmetic (src/train/predict.c): the
# memory estimate, the batch the layers are timed at, the scaling and the
# linearity figure.
include_guard(GLOBAL)
so_add_test(test_predict LABELS unit TIMEOUT 60)
