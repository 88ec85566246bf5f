/* Which kernel features hugezero uses are present, probed on harmless
 * private mappings. For `hugezero status` and start-up decisions. */
#ifndef HZ_PRIM_FEATURES_H
#define HZ_PRIM_FEATURES_H

#include <stdbool.h>

bool hz_feature_populate_write(void); /* MADV_POPULATE_WRITE, Linux 5.14 */
bool hz_feature_collapse(void);       /* MADV_COLLAPSE on anonymous memory, 6.1 */
bool hz_feature_cachestat(void);      /* cachestat(2), 6.5 */
bool hz_feature_anon_name(void);      /* PR_SET_VMA_ANON_NAME, 5.17 + CONFIG_ANON_VMA_NAME */

#endif /* HZ_PRIM_FEATURES_H */
