/* --compress auto's report, shared by `train` and `bench accuracy`: one
 * line naming the method chosen (or taken from the checkpoint resumed), the link it measured and every
 * candidate's predicted step time, the share of the gradient its message
 * lost and the steps-to-target factor that gives, and the same under
 * "compress_auto" in --json with the step's predicted terms (compute, each
 * method's compress and decompress time). */
#include <stdio.h>

#include "cli.h"
#include "scaleout/json.h"
#include "scaleout/train.h"

void cli_compress_auto_print(const so_train_result *r)
{
    if (r->compress_auto_resumed[0])
        printf("compress auto: %s, as chosen before the checkpoint this run resumed (its state restored)\n",
               r->compress_auto_resumed);
    if (r->compress_auto_n <= 0)
        return;
    printf("compress auto: %s after step %ld; link %.0f us + %.3f Gbyte/s; predicted step (x steps to target, from error)",
           r->compress_auto_name[r->compress_auto_pick], r->compress_auto_step, r->compress_auto_link_alpha * 1e6,
           r->compress_auto_link_beta > 0 ? 1e-9 / r->compress_auto_link_beta : 0);
    for (int i = 0; i < r->compress_auto_n; i++)
        printf("%s %s %.2f ms (x%.2f, %.3f)", i ? "," : "", r->compress_auto_name[i],
               r->compress_auto_predicted[i] * 1e3, r->compress_auto_steps_factor[i], r->compress_auto_rel_error[i]);
    printf("\n");
}

void cli_compress_auto_json(so_json *js, const so_train_result *r)
{
    if (r->compress_auto_resumed[0]) {
        so_json_obj_begin(js, "compress_auto");
        so_json_str(js, "picked", r->compress_auto_resumed);
        so_json_bool(js, "resumed", 1);
        so_json_obj_end(js);
    }
    if (r->compress_auto_n <= 0)
        return;
    so_json_obj_begin(js, "compress_auto");
    so_json_str(js, "picked", r->compress_auto_name[r->compress_auto_pick]);
    so_json_int(js, "after_step", r->compress_auto_step);
    so_json_num(js, "link_alpha_seconds", r->compress_auto_link_alpha);
    so_json_num(js, "link_beta_seconds_per_byte", r->compress_auto_link_beta);
    so_json_num(js, "compute_seconds", r->compress_auto_compute);
    so_json_num(js, "other_seconds", r->compress_auto_other);
    so_json_arr_begin(js, "methods");
    for (int i = 0; i < r->compress_auto_n; i++) {
        so_json_obj_begin(js, NULL);
        so_json_str(js, "method", r->compress_auto_name[i]);
        so_json_num(js, "predicted_step_seconds", r->compress_auto_predicted[i]);
        so_json_num(js, "steps_factor", r->compress_auto_steps_factor[i]);
        so_json_num(js, "relative_error", r->compress_auto_rel_error[i]);
        so_json_num(js, "bytes_ratio", r->compress_auto_ratio[i]);
        so_json_num(js, "overhead_seconds", r->compress_auto_overhead[i]);
        so_json_num(js, "compress_seconds", r->compress_auto_encode[i]);
        so_json_obj_end(js);
    }
    so_json_arr_end(js);
    so_json_obj_end(js);
}
