/* SPDX-License-Identifier: GPL-2.0 */
/* Small helpers shared by the selftests' verbs programs. */
#ifndef SROCE_SELFTEST_COMMON_H
#define SROCE_SELFTEST_COMMON_H

#include <errno.h>
#include <inttypes.h>
#include <infiniband/verbs.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int failures;

/*
 * CHECK_OR_NOTE(excused, cond, fmt, ...): print "ok ..." or, if cond is
 * false, "FAIL ..." and count a failure; when excused (a check only sroce
 * is held to, in a reference run against rxe) "note: rxe differs: ..."
 * instead.
 */
#define CHECK_OR_NOTE(excused, cond, ...)                                      \
	do {                                                                   \
		if (cond) {                                                    \
			printf("ok   ");                                       \
		} else if (excused) {                                          \
			printf("note: rxe differs: ");                         \
		} else {                                                       \
			printf("FAIL ");                                       \
			failures++;                                            \
		}                                                              \
		printf(__VA_ARGS__);                                           \
		printf("\n");                                                  \
	} while (0)

/* CHECK(cond, fmt, ...): print "ok ..." or "FAIL ..." and count failures. */
#define CHECK(cond, ...) CHECK_OR_NOTE(0, cond, __VA_ARGS__)

static inline struct ibv_context *open_device_by_name(const char *name)
{
	struct ibv_device **list;
	struct ibv_context *ctx = NULL;
	int i, n;

	list = ibv_get_device_list(&n);
	if (!list)
		return NULL;
	for (i = 0; i < n; i++)
		if (!strcmp(ibv_get_device_name(list[i]), name))
			ctx = ibv_open_device(list[i]);
	ibv_free_device_list(list);
	return ctx;
}

/*
 * rc_connect: moves an RC QP in INIT to RTS, connected to QP dest_qpn at
 * dgid over sgid_index, path MTU 1024, timeout 14 (67 ms; the environment's
 * SROCE_QP_TIMEOUT if set), 7 retries and RNR retries, rd_atomic
 * READs/atomics outstanding each way.
 */
static inline int rc_connect_mtu(struct ibv_qp *qp, int sgid_index, const union ibv_gid *dgid,
				uint32_t dest_qpn, uint32_t sq_psn, uint32_t rq_psn,
				uint8_t rd_atomic, enum ibv_mtu path_mtu)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_RTR, .path_mtu = path_mtu, .dest_qp_num = dest_qpn,
		.rq_psn = rq_psn, .max_dest_rd_atomic = rd_atomic, .min_rnr_timer = 12,
		.ah_attr = {
			.is_global = 1, .port_num = 1,
			.grh = { .dgid = *dgid, .sgid_index = sgid_index, .hop_limit = 64 },
		},
	};

	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
			  IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
			  IBV_QP_MIN_RNR_TIMER))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = sq_psn;
	a.timeout = getenv("SROCE_QP_TIMEOUT") ? atoi(getenv("SROCE_QP_TIMEOUT")) : 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = rd_atomic;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT |
			     IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC);
}

/* rc_connect_mtu at path MTU 1024. */
static inline int rc_connect(struct ibv_qp *qp, int sgid_index, const union ibv_gid *dgid,
			    uint32_t dest_qpn, uint32_t sq_psn, uint32_t rq_psn,
			    uint8_t rd_atomic)
{
	return rc_connect_mtu(qp, sgid_index, dgid, dest_qpn, sq_psn, rq_psn, rd_atomic,
			      IBV_MTU_1024);
}

/*
 * open_port: the start of a program's side: device dev opened, port 1's
 * GID gid_index read, a PD, and a send and a receive CQ of cqe entries.
 * 0, or -1 (what was made is left to the caller's teardown).
 */
static inline int open_port(const char *dev, int gid_index, int cqe, struct ibv_context **ctx,
			    union ibv_gid *gid, struct ibv_pd **pd, struct ibv_cq **scq,
			    struct ibv_cq **rcq)
{
	*ctx = open_device_by_name(dev);
	if (!*ctx) {
		fprintf(stderr, "cannot open %s\n", dev);
		return -1;
	}
	if (ibv_query_gid(*ctx, 1, gid_index, gid))
		return -1;
	*pd = ibv_alloc_pd(*ctx);
	*scq = ibv_create_cq(*ctx, cqe, NULL, NULL, 0);
	*rcq = ibv_create_cq(*ctx, cqe, NULL, NULL, 0);
	return *pd && *scq && *rcq ? 0 : -1;
}

/*
 * rc_side: one end of a test's RC connection: the device, a PD, one CQ of
 * 2 * max_send_wr entries for both queues, a page-aligned buffer of len
 * bytes registered with access, and an RC QP (max_send_wr send WQEs, one
 * receive WQE, one SGE each) in INIT with the same remote access.
 */
struct rc_side {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	int gid_index;
	union ibv_gid gid;
	uint8_t *buf;
	struct ibv_mr *mr;
};

/* 0, or -1 (what was made is left to rc_side_close). */
static inline int rc_side_open(struct rc_side *s, const char *dev, int gid_index,
			       uint32_t max_send_wr, size_t len, int access)
{
	struct ibv_qp_init_attr init = {
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = max_send_wr, .max_recv_wr = 1, .max_send_sge = 1,
			 .max_recv_sge = 1 },
	};
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT, .port_num = 1, .qp_access_flags = access,
	};

	s->ctx = open_device_by_name(dev);
	if (!s->ctx)
		return -1;
	s->gid_index = gid_index;
	if (ibv_query_gid(s->ctx, 1, gid_index, &s->gid))
		return -1;
	s->pd = ibv_alloc_pd(s->ctx);
	s->cq = ibv_create_cq(s->ctx, 2 * max_send_wr, NULL, NULL, 0);
	if (!s->pd || !s->cq || posix_memalign((void **)&s->buf, 4096, len))
		return -1;
	s->mr = ibv_reg_mr(s->pd, s->buf, len, access);
	init.send_cq = init.recv_cq = s->cq;
	s->qp = s->mr ? ibv_create_qp(s->pd, &init) : NULL;
	if (!s->qp)
		return -1;
	return ibv_modify_qp(s->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			     IBV_QP_ACCESS_FLAGS);
}

/* Moves s's QP to RTS, connected to peer's (send PSN psn, receive peer_psn). */
static inline int rc_side_connect(struct rc_side *s, struct rc_side *peer, uint32_t psn,
				  uint32_t peer_psn)
{
	return rc_connect(s->qp, s->gid_index, &peer->gid, peer->qp->qp_num, psn, peer_psn, 0);
}

static inline void rc_side_close(struct rc_side *s)
{
	if (s->qp)
		ibv_destroy_qp(s->qp);
	if (s->mr)
		ibv_dereg_mr(s->mr);
	if (s->cq)
		ibv_destroy_cq(s->cq);
	if (s->pd)
		ibv_dealloc_pd(s->pd);
	if (s->ctx)
		ibv_close_device(s->ctx);
	free(s->buf);
}

/* A monotonic clock in milliseconds. */
static inline long now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* One completion from cq within wait_ms (polled, as latency tools do):
 * 1, or 0 if none came. */
static inline int poll_cq_within(struct ibv_cq *cq, struct ibv_wc *wc, long wait_ms)
{
	long end = now_ms() + wait_ms;
	int n;

	do {
		n = ibv_poll_cq(cq, 1, wc);
		if (n)
			return n > 0;
		usleep(200);
	} while (now_ms() < end);
	return 0;
}

/* The QP's state, or -1 if it cannot be queried. */
static inline enum ibv_qp_state qp_state(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;

	if (ibv_query_qp(qp, &a, IBV_QP_STATE, &ia))
		return (enum ibv_qp_state)-1;
	return a.qp_state;
}

/*
 * Whether the QP's state is `want` within `wait_ms` (read until it is).
 * An error completion may be visible a moment before the QP's state says
 * ERR: rxe 7.3 posts the completion, then moves the QP; sroce publishes
 * the state later in the pass that posted it (a process sees the
 * completion in its mapped ring at once). The verbs do not order the two,
 * so a test reads the state until it changes, not once.
 */
static inline int qp_state_within(struct ibv_qp *qp, enum ibv_qp_state want, long wait_ms)
{
	long end = now_ms() + wait_ms;

	for (;;) {
		if (qp_state(qp) == want)
			return 1;
		if (now_ms() >= end)
			return 0;
		usleep(200);
	}
}

/* Takes whatever reaches cq within a moment and forgets it. */
static inline void drain(struct ibv_cq *cq)
{
	struct ibv_wc wc[16];

	usleep(20 * 1000);
	while (ibv_poll_cq(cq, 16, wc) > 0)
		;
}

/* n bytes of a sequence determined by seed. */
static inline void fill(uint8_t *p, size_t n, unsigned int seed)
{
	size_t i;

	for (i = 0; i < n; i++) {
		seed = seed * 1103515245 + 12345;
		p[i] = seed >> 16;
	}
}

/* ms scaled for slow kernels: the suite's SROCE_TIMEOUT_SCALE, which also
 * scales the RC transport timeout (SROCE_QP_TIMEOUT) that a wait for a
 * completion under loss is made of. */
static inline long scaled_ms(long ms)
{
	const char *s = getenv("SROCE_TIMEOUT_SCALE");
	long k = s ? atol(s) : 1;

	return k > 1 ? ms * k : ms;
}

/* The next completion on cq within wait_ms (scaled): its status if it is
 * wr_id id's, else < 0 (-2: none came, -3: another's, printed). */
static inline int wait_wc_of(struct ibv_cq *cq, uint64_t id, struct ibv_wc *wc, long wait_ms)
{
	memset(wc, 0, sizeof(*wc));
	if (!poll_cq_within(cq, wc, scaled_ms(wait_ms)))
		return -2;
	if (wc->wr_id != id) {
		printf("     (completion of wr_id %" PRIu64 ", status %s, expected wr_id %" PRIu64 ")\n",
		       wc->wr_id, ibv_wc_status_str(wc->status), id);
		return -3;
	}
	return wc->status;
}

/* ------------------------------------------------ raw access to the rings */
#include <stdint.h>

/*
 * The header of a ring shared with the kernel (the rxe uverbs ABI's
 * struct rxe_queue_buf); the slots follow it.
 */
struct ring_hdr {
	uint32_t log2_elem_size;
	uint32_t index_mask;
	uint32_t pad_1[30];
	uint32_t producer_index;
	uint32_t pad_2[31];
	uint32_t consumer_index;
	uint32_t pad_3[31];
};

static inline void *ring_slot(struct ring_hdr *r, uint32_t i)
{
	return (uint8_t *)(r + 1) + ((size_t)(i & r->index_mask) << r->log2_elem_size);
}

struct mapping {
	uintptr_t start, end;
};

/* The process's mappings of /dev/infiniband/uverbs*. */
static inline int uverbs_maps(struct mapping *m, int max)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];
	int n = 0;

	if (!f)
		return 0;
	while (n < max && fgets(line, sizeof(line), f)) {
		unsigned long s, e;

		if (!strstr(line, "uverbs") || sscanf(line, "%lx-%lx", &s, &e) != 2)
			continue;
		m[n].start = s;
		m[n].end = e;
		n++;
	}
	fclose(f);
	return n;
}

/*
 * The first uverbs mapping that is not in before[0..nb): the ring a verb
 * just mapped (a QP with an SRQ maps one ring of its own, its send ring).
 */
static inline struct ring_hdr *new_ring(const struct mapping *before, int nb)
{
	struct mapping after[64];
	int na = uverbs_maps(after, 64), i, j;

	for (i = 0; i < na; i++) {
		for (j = 0; j < nb; j++)
			if (after[i].start == before[j].start)
				break;
		if (j == nb)
			return (struct ring_hdr *)after[i].start;
	}
	return NULL;
}

#endif
