#!/usr/bin/env bash
# kiln calibrate / compile --quantize / compare on the small generated
# models of gen_quant_models.py.
set -uo pipefail
kiln="$1"; python="$2"
here="$(cd "$(dirname "$0")" && pwd)"
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
fails=0; passes=0
ok() { passes=$((passes + 1)); }
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }

# expect RC SUBSTRING -- command...
expect() {
  local want_rc="$1" want="$2"; shift 3
  local out rc
  out=$("$@" 2>&1); rc=$?
  if [ "$rc" -ne "$want_rc" ] || ! grep -qF -- "$want" <<<"$out"; then
    bad "$*"; echo "  want rc=$want_rc and '$want'"; echo "  got rc=$rc: $(head -5 <<<"$out")"
  else ok; fi
}

"$python" "$here/gen_quant_models.py" "$tmp" --samples 24 --eval 16 || { echo "cannot generate the models"; exit 1; }
cd "$tmp"

# byte-identical tables: twice, threads 1 and 2, folder and stacked file
for m in percentile minmax entropy mse; do
  "$kiln" calibrate cnn.onnx --data cnn_data --method "$m" -o "a_$m.json" 2>/dev/null || bad "calibrate $m"
  "$kiln" calibrate cnn.onnx --data cnn_data --method "$m" -o "b_$m.json" 2>/dev/null || bad "calibrate $m again"
  "$kiln" calibrate cnn.onnx --data cnn_data --method "$m" --threads 2 -o "c_$m.json" 2>/dev/null || bad "calibrate $m -t2"
  "$kiln" calibrate cnn.onnx --data x=cnn_stacked.npy --method "$m" --threads 2 -o "d_$m.json" 2>/dev/null || bad "stacked $m"
  if cmp -s "a_$m.json" "b_$m.json" && cmp -s "a_$m.json" "c_$m.json" && cmp -s "a_$m.json" "d_$m.json"; then ok
  else bad "tables of --method $m differ between runs, thread counts or data layouts"; fi
done
grep -q '"stem_relu"' a_percentile.json && ! grep -q '"stem"' a_percentile.json && ok \
  || bad "the table should hold stem_relu and not the Conv output fused into it"

# static-int8 on the CNN, dynamic-int8 on the MLP: close to FP32
cos_of() { awk -v o="$2" '$1 == o { print $4 }' "$1"; }
"$kiln" compile cnn.onnx --quantize static-int8 --calib a_percentile.json -o cnn_q.so || bad "compile static-int8"
"$kiln" compare cnn.onnx cnn_q.so --data cnn_eval > cmp_cnn.txt || bad "compare cnn"
c=$(cos_of cmp_cnn.txt logits); cat cmp_cnn.txt
awk -v c="$c" 'BEGIN { exit !(c > 0.99) }' && ok || bad "static-int8 cosine $c <= 0.99"
"$kiln" compile mlp.onnx --quantize dynamic-int8 -o mlp_dq.so || bad "compile dynamic-int8"
"$kiln" compare mlp.onnx mlp_dq.so --data mlp_eval > cmp_mlp.txt || bad "compare mlp"
c=$(cos_of cmp_mlp.txt y); cat cmp_mlp.txt
awk -v c="$c" 'BEGIN { exit !(c > 0.99) }' && ok || bad "dynamic-int8 cosine $c <= 0.99"
"$kiln" calibrate mlp.onnx --data mlp_data --per-channel --keep-float mm1 -o mlp.json 2>/dev/null || bad "calibrate mlp"
"$kiln" compile mlp.onnx --quantize static-int8 --calib mlp.json -o mlp_q.so || bad "compile mlp static-int8"
"$kiln" compare mlp.onnx mlp_q.so --data mlp_eval > cmp_mlpq.txt || bad "compare mlp static"
c=$(cos_of cmp_mlpq.txt y)
awk -v c="$c" 'BEGIN { exit !(c > 0.99) }' && ok || bad "mlp static-int8 cosine $c <= 0.99"
grep -q '"keep_float": \["mm1"\]' mlp.json && grep -q '"per_channel": true' mlp.json && ok || bad "table options"

# per-layer report: every table tensor, worst first
"$kiln" compare cnn.onnx --per-layer --calib a_percentile.json --data cnn_eval > layers.txt || bad "per-layer"
[ "$(grep -c ' ' layers.txt)" -ge 9 ] && ok || bad "per-layer report: $(cat layers.txt)"
awk 'NR > 2 { if (prev != "" && $5 + 0 < prev + 0) exit 1; prev = $5 }' layers.txt && ok || bad "per-layer order"

# an onnxruntime static QDQ model: kiln compiles it, and --per-layer takes
# its QuantizeLinear parameters
if "$python" - <<'PY' 2>/dev/null
import numpy as np
from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static
class R(CalibrationDataReader):
    def __init__(self):
        self.it = iter([{"x": np.load(f"cnn_data/x_{i}.npy")} for i in range(8)])
    def get_next(self):
        return next(self.it, None)
quantize_static("cnn.onnx", "cnn_ort.onnx", R(), quant_format=QuantFormat.QDQ, activation_type=QuantType.QUInt8,
                weight_type=QuantType.QInt8, per_channel=True)
PY
then
  "$kiln" compare cnn.onnx cnn_ort.onnx --data cnn_eval > cmp_ort.txt || bad "compare with onnxruntime's QDQ model"
  c=$(cos_of cmp_ort.txt logits); cat cmp_ort.txt
  awk -v c="$c" 'BEGIN { exit !(c > 0.99) }' && ok || bad "onnxruntime QDQ model through kiln: cosine $c"
  "$kiln" compare cnn.onnx cnn_ort.onnx --per-layer --data cnn_eval > layers_ort.txt || bad "per-layer from a QDQ model"
  grep -q '^stem_relu ' layers_ort.txt && ok || bad "per-layer from a QDQ model: $(cat layers_ort.txt)"
else
  echo "note: onnxruntime.quantization unavailable; skipped the QDQ model checks"
fi

# the artifact's model hash covers the quantization
"$kiln" compile cnn.onnx -o cnn.so --emit-header cnn.h && "$kiln" compile cnn.onnx --quantize static-int8 \
  --calib a_percentile.json -o cnn_q.so --emit-header cnn_q.h || bad "compile with headers"
h1=$(grep -o '_HASH 0x[0-9a-f]*' cnn.h | head -1); h2=$(grep -o '_HASH 0x[0-9a-f]*' cnn_q.h | head -1)
[ -n "$h1" ] && [ "$h1" != "$h2" ] && ok || bad "the model hash does not change with --quantize ('$h1' '$h2')"

# errors
expect 2 "needs --calib" -- "$kiln" compile cnn.onnx --quantize static-int8 -o x.so
expect 2 "takes static-int8 or dynamic-int8" -- "$kiln" compile cnn.onnx --quantize int3 -o x.so
expect 1 "made for another model" -- "$kiln" compile mlp.onnx --quantize static-int8 --calib a_percentile.json -o x.so
sed 's/"stem_relu"/"no_such_tensor"/' a_percentile.json > renamed.json
h=$("$python" -c "import hashlib,sys;d=open('cnn.onnx','rb').read();h=0xcbf29ce484222325
for b in d: h=((h^b)*0x100000001b3)&0xffffffffffffffff
print('%016x'%h)")
grep -q "\"model_hash\": \"$h\"" renamed.json && ok || bad "model_hash is not FNV-1a of the model ($h)"
expect 1 "no_such_tensor" -- "$kiln" compile cnn.onnx --quantize static-int8 --calib renamed.json -o x.so
sed 's/"scale": [0-9.e-]*/"scale": -1/' a_percentile.json > badscale.json
expect 1 "badscale.json: tensors.x.scale" -- "$kiln" compile cnn.onnx --quantize static-int8 --calib badscale.json -o x.so
[ ! -e x.so ] && ok || bad "a failed compile left x.so"
expect 2 "--method takes" -- "$kiln" calibrate cnn.onnx --data cnn_data --method best -o t.json
expect 1 "no input named 'y'" -- "$kiln" calibrate cnn.onnx --data y=cnn_stacked.npy -o t.json
mkdir empty; expect 1 "x_0.npy" -- "$kiln" calibrate cnn.onnx --data empty -o t.json
mkdir gap; cp cnn_data/x_0.npy cnn_data/x_2.npy gap/; expect 0 "2 samples" -- "$kiln" calibrate cnn.onnx --data gap -o t.json
expect 1 "--keep-float 'conv9'" -- "$kiln" calibrate cnn.onnx --data cnn_data --keep-float conv9 -o t.json
expect 1 "--keep-float 'Softmax'" -- "$kiln" compile cnn.onnx --quantize static-int8 --calib a_percentile.json --keep-float Softmax -o x.so
expect 0 "" -- "$kiln" compile cnn.onnx --quantize static-int8 --calib a_percentile.json --keep-float c2,Gemm -o kf.so
expect 0 "usage: kiln calibrate" -- "$kiln" calibrate --help
expect 0 "usage: kiln compare" -- "$kiln" compare --help
expect 2 "--per-layer needs" -- "$kiln" compare cnn.onnx --per-layer --data cnn_eval

echo "$passes passed, $fails failed"
[ "$fails" -eq 0 ]
