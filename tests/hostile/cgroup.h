/* Real cgroups for the container cases (root only): a new cgroup below the
 * one this process is in, removed again at the end, at exit and on the
 * signals a timeout sends (hostile_undo_*). The program under test starts
 * inside it: the case forks, the child joins, then execs the case again
 * with "inside" so that whatever the preload does at start-up sees the
 * container's limits. */
#ifndef HZ_TESTS_HOSTILE_CGROUP_H
#define HZ_TESTS_HOSTILE_CGROUP_H

#include <stdbool.h>
#include <stddef.h>

struct cgroup {
	char dir[600]; /* the new cgroup */
	bool v2;
};

/* Create a cgroup with controller ("memory", "hugetlb") enabled: v2 where
 * the controller is on a cgroup2 mount, else v1. 0, or -1 with the
 * reason in why (the case then skips). */
int cgroup_create(const char *controller, struct cgroup *cg, char *why, size_t why_len);

/* Write text into the cgroup's file name; 0 or -1. */
int cgroup_set(const struct cgroup *cg, const char *name, const char *text);

/* Fork; the child joins the cgroup and execs this program with "inside".
 * Returns the child's outcome (hostile_wait). */
int cgroup_run_inside(const struct cgroup *cg, const char *self);
/* The same with argument arg in place of "inside". */
int cgroup_run_inside_as(const struct cgroup *cg, const char *self, const char *arg);

#endif /* HZ_TESTS_HOSTILE_CGROUP_H */
