/* ONNX ModelProto → kiln IR (placeholder until the importer lands). */
#include "onnx_import.h"

int kn_onnx_load_file(const char *path, kn_model **out_model)
{
    *out_model = NULL;
    return kn_error(KN_ERR_UNSUPPORTED, "%s: ONNX import is not built yet", path);
}
