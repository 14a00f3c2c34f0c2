/* The strategies of the registry (strategy.c), private to the train module. */
#ifndef SCALEOUT_TRAIN_STRATEGY_INTERNAL_H
#define SCALEOUT_TRAIN_STRATEGY_INTERNAL_H
#include "scaleout/strategy.h"

extern const so_strategy_kind so_strategy_kind_dp;    /* strategy_dp.c */
extern const so_strategy_kind so_strategy_kind_zero1; /* strategy_zero.c */
extern const so_strategy_kind so_strategy_kind_zero2;
extern const so_strategy_kind so_strategy_kind_zero3;
extern const so_strategy_kind so_strategy_kind_ps;    /* strategy_ps.c (--sync ssp:S, async) */
extern const so_strategy_kind so_strategy_kind_local;  /* strategy_local.c: --sync local:H */
extern const so_strategy_kind so_strategy_kind_diloco; /* strategy_local.c: --sync diloco:H */
extern const so_strategy_kind so_strategy_kind_gossip; /* strategy_gossip.c: --sync gossip:T */

#endif
