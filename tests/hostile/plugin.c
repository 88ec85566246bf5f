/* A plug-in whose DT_RUNPATH ($ORIGIN/lib) is the only way to find the
 * library it uses, as plug-ins shipped with their own libraries are. Its
 * constructor loads that library by bare name (result in
 * hostile_plugin_result), and hostile_plugin_load does the same later,
 * from an ordinary call: in both, the calling object is the plug-in. */
#include <dlfcn.h>

int hostile_plugin_result = -1;

int hostile_plugin_load(const char *name);

int hostile_plugin_load(const char *name)
{
	void *h = dlopen(name, RTLD_NOW);
	int (*answer)(void) = h ? (int (*)(void))dlsym(h, "hostile_answer") : 0;

	return answer ? answer() : -2;
}

__attribute__((constructor)) static void load_from_constructor(void)
{
	hostile_plugin_result = hostile_plugin_load("libhostile_answer.so");
}
