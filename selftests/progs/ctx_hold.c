// SPDX-License-Identifier: GPL-2.0
/*
 * ctx_hold DEVICE READY-FILE: opens a user context on DEVICE (through the
 * provider library, as every verbs program does), queries device and port
 * through it, creates READY-FILE, then holds the context until killed. On
 * SIGUSR1 it queries the port again and prints "requery: N" (0 or the
 * errno), to show what a process sees once its device has gone away.
 * Exit status: 0 never (killed), 1 on any verbs error, 2 on usage errors.
 */
#include <infiniband/verbs.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t requery;

static void on_usr1(int sig)
{
	(void)sig;
	requery = 1;
}

int main(int argc, char **argv)
{
	struct ibv_device **list;
	struct ibv_context *ctx = NULL;
	struct ibv_device_attr dattr;
	struct ibv_port_attr pattr;
	FILE *ready;
	int i, n;

	if (argc != 3) {
		fprintf(stderr, "usage: %s DEVICE READY-FILE\n", argv[0]);
		return 2;
	}
	list = ibv_get_device_list(&n);
	if (!list) {
		perror("ibv_get_device_list");
		return 1;
	}
	for (i = 0; i < n; i++)
		if (!strcmp(ibv_get_device_name(list[i]), argv[1]))
			ctx = ibv_open_device(list[i]);
	ibv_free_device_list(list);
	if (!ctx) {
		fprintf(stderr, "cannot open %s\n", argv[1]);
		return 1;
	}
	if (ibv_query_device(ctx, &dattr) || ibv_query_port(ctx, 1, &pattr)) {
		perror("query");
		return 1;
	}
	printf("opened %s: max_qp %d, port state %d\n", argv[1], dattr.max_qp,
	       pattr.state);
	fflush(stdout);
	ready = fopen(argv[2], "w");
	if (!ready) {
		perror(argv[2]);
		return 1;
	}
	fclose(ready);
	signal(SIGUSR1, on_usr1);
	for (;;) {
		pause();
		if (requery) {
			requery = 0;
			printf("requery: %d\n", ibv_query_port(ctx, 1, &pattr));
			fflush(stdout);
		}
	}
}
