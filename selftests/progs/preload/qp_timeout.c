// SPDX-License-Identifier: GPL-2.0
/*
 * LD_PRELOAD shim for rdma-core's example programs (ibv_rc_pingpong and
 * friends), whose RC transport timeout is fixed at 14 (67 ms): on a slow
 * kernel (the debug kernel under TCG) one long message can take longer
 * than that to arrive, and every try times out before its ACK. With
 * SROCE_QP_TIMEOUT=N in the environment, a modify_qp that sets a finite
 * timeout below N sets N instead (the same exponent the test programs and
 * perftest get from the test helpers); everything else passes unchanged.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <infiniband/verbs.h>

typedef int (*modify_qp_fn)(struct ibv_qp *, struct ibv_qp_attr *, int);

int ibv_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int attr_mask)
{
	static modify_qp_fn real;
	const char *env = getenv("SROCE_QP_TIMEOUT");
	struct ibv_qp_attr raised;

	if (!real)
		real = (modify_qp_fn)dlvsym(RTLD_NEXT, "ibv_modify_qp", "IBVERBS_1.1");
	if (!real)
		abort();
	if (env && (attr_mask & IBV_QP_TIMEOUT) && attr->timeout) {
		long want = strtol(env, NULL, 10);

		if (want > attr->timeout && want <= 31) {
			/* The caller's attributes stay as it set them. */
			raised = *attr;
			raised.timeout = (uint8_t)want;
			attr = &raised;
		}
	}
	return real(qp, attr, attr_mask);
}
