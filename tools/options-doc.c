/* Print the README's option table from options.def:
 *   build/tools/options-doc > table.md
 * The test options_table_matches_readme fails when README.md differs. */
#include <stdio.h>
#include <stdlib.h>

#include "options_doc.h"

int main(void)
{
	size_t len = hz_options_markdown(NULL, 0);
	char *buf = malloc(len + 1);

	if (buf == NULL)
		return 1;
	hz_options_markdown(buf, len + 1);
	fputs(buf, stdout);
	free(buf);
	return 0;
}
