/* Weak fallbacks for the oneDNN wrapper while runtime/src/dnnl.c is being
 * written; the strong definitions there replace these. (Temporary.) */
#include "rt_internal.h"

__attribute__((weak)) int kn_dnnl_session_init(kn_dnnl_session **out)
{
    *out = NULL;
    return KN_OK;
}
__attribute__((weak)) void kn_dnnl_session_free(kn_dnnl_session *s) { (void)s; }
__attribute__((weak)) int kn_dnnl_prim_create(kn_dnnl_session *s, const kn_abi_dnnl *rec, const unsigned char *w,
                                              kn_dnnl_prim **out)
{
    (void)s, (void)rec, (void)w;
    *out = NULL;
    return kn_error(KN_ERR_UNSUPPORTED, "oneDNN is not wired in yet");
}
__attribute__((weak)) int kn_dnnl_prim_exec(kn_dnnl_session *s, kn_dnnl_prim *p, void *src, const void *wei,
                                            const void *bias, void *dst, const void *post_src, int threads)
{
    (void)s, (void)p, (void)src, (void)wei, (void)bias, (void)dst, (void)post_src, (void)threads;
    return kn_error(KN_ERR_UNSUPPORTED, "oneDNN is not wired in yet");
}
__attribute__((weak)) void kn_dnnl_prim_free(kn_dnnl_prim *p) { (void)p; }
