#!/usr/bin/env bash
# Makes a real multi-bitrate HLS VOD library with ffmpeg from synthetic
# sources (testsrc2 video + sine audio): deterministic, no network.
#
#   bash scripts/make-demo.sh [DIR]          (default: demo/library)
#   HE_DEMO_SECONDS=120 bash scripts/make-demo.sh
#
# Layout:
#   DIR/master.m3u8                 master playlist, all five renditions
#   DIR/<rendition>/index.m3u8      media playlist (VOD, #EXT-X-ENDLIST)
#   DIR/<rendition>/seg_00000.ts    6-second MPEG-TS segments, H.264 + AAC
# Renditions: 288p 360p 576p 720p 1080p at ~0.4/0.8/1.5/3/6 Mbit/s video.
#
# Skips the work when DIR/.hlsedge-demo (written last) says the library is
# complete for the same parameters. Takes about one second of wall time per
# second of content on 2 cores.
set -euo pipefail

DIR=${1:-demo/library}
SECONDS_LEN=${HE_DEMO_SECONDS:-60}
FPS=30
SEG=6
STAMP_NAME=.hlsedge-demo
STAMP_VERSION=1

# name width height video-kbit/s audio-kbit/s x264-profile
RENDITIONS=(
    "288p  512  288  400  96 main"
    "360p  640  360  800  96 main"
    "576p  1024 576  1500 128 high"
    "720p  1280 720  3000 128 high"
    "1080p 1920 1080 6000 128 high"
)

die() { echo "make-demo: $*" >&2; exit 1; }

[[ "$SECONDS_LEN" =~ ^[0-9]+$ ]] && [ "$SECONDS_LEN" -ge 1 ] ||
    die "HE_DEMO_SECONDS must be a positive integer (got '$SECONDS_LEN')"
command -v ffmpeg >/dev/null && command -v ffprobe >/dev/null ||
    die "ffmpeg/ffprobe not found (run scripts/setup.sh)"

stamp_text="version=$STAMP_VERSION seconds=$SECONDS_LEN fps=$FPS segment=$SEG renditions=$(
    for r in "${RENDITIONS[@]}"; do set -- $r; printf '%s:%sx%s@%sk,' "$1" "$2" "$3" "$4"; done)"

if [ -f "$DIR/$STAMP_NAME" ] && [ -f "$DIR/master.m3u8" ] &&
    [ "$(cat "$DIR/$STAMP_NAME")" = "$stamp_text" ]; then
    echo "make-demo: $DIR is complete ($SECONDS_LEN s), skipping"
    exit 0
fi

# Never delete something that is not ours: an existing DIR must be empty,
# or look like a (possibly partial or older) demo library.
if [ -e "$DIR" ]; then
    [ -d "$DIR" ] || die "$DIR exists and is not a directory"
    if [ -n "$(ls -A "$DIR")" ] && [ ! -f "$DIR/master.m3u8" ] && [ ! -f "$DIR/$STAMP_NAME" ] &&
        [ ! -d "$DIR/288p" ]; then
        die "$DIR is not empty and not a demo library; refusing to overwrite"
    fi
fi

parent=$(dirname "$DIR")
mkdir -p "$parent"
work=$(mktemp -d "$parent/.make-demo.XXXXXX")
trap 'rm -rf "$work"' EXIT

echo "make-demo: encoding $SECONDS_LEN s x ${#RENDITIONS[@]} renditions into $DIR ..."
start=$(date +%s.%N)

# One ffmpeg run: one testsrc2 source at 1080p split and scaled five ways,
# one AAC encode per rendition, one HLS muxer with five variant streams.
n=${#RENDITIONS[@]}
filter="[0:v]split=$n"
for ((i = 0; i < n; i++)); do filter+="[s$i]"; done
maps=() vopts=() aopts=() vsm=""
for ((i = 0; i < n; i++)); do
    set -- ${RENDITIONS[$i]}
    name=$1 w=$2 h=$3 vk=$4 ak=$5 prof=$6
    filter+=";[s$i]scale=${w}:${h}:flags=bicubic,setsar=1[v$i]"
    maps+=(-map "[v$i]")
    vopts+=("-b:v:$i" "${vk}k" "-maxrate:v:$i" "$((vk * 12 / 10))k" "-bufsize:v:$i" "$((vk * 2))k"
            "-profile:v:$i" "$prof")
    aopts+=("-b:a:$i" "${ak}k")
    vsm+="v:$i,a:$i,name:$name "
done
for ((i = 0; i < n; i++)); do maps+=(-map 1:a); done

ffmpeg -hide_banner -loglevel error -nostdin -y \
    -f lavfi -i "testsrc2=size=1920x1080:rate=$FPS:duration=$SECONDS_LEN" \
    -f lavfi -i "sine=frequency=440:beep_factor=4:sample_rate=48000:duration=$SECONDS_LEN" \
    -filter_complex "$filter" "${maps[@]}" \
    -c:v libx264 -preset veryfast -pix_fmt yuv420p \
    -g $((FPS * 2)) -keyint_min $((FPS * 2)) -sc_threshold 0 \
    "${vopts[@]}" \
    -c:a aac -ac 2 -ar 48000 "${aopts[@]}" \
    -fflags +bitexact -flags:v +bitexact -flags:a +bitexact \
    -f hls -hls_time $SEG -hls_playlist_type vod -hls_segment_type mpegts \
    -hls_segment_filename "$work/%v/seg_%05d.ts" \
    -master_pl_name master.m3u8 \
    -var_stream_map "${vsm% }" \
    "$work/%v/index.m3u8"

enc_end=$(date +%s.%N)

# ---------------------------------------------------------------- verify
expect_segs=$(((SECONDS_LEN + SEG - 1) / SEG))
[ -f "$work/master.m3u8" ] || die "ffmpeg wrote no master.m3u8"
for r in "${RENDITIONS[@]}"; do
    set -- $r
    name=$1 w=$2 h=$3
    pl="$work/$name/index.m3u8"
    [ -f "$pl" ] || die "$name: no index.m3u8"
    grep -qx "$name/index.m3u8" "$work/master.m3u8" || die "master.m3u8 does not list $name"
    grep -q "RESOLUTION=${w}x${h},CODECS=\"avc1\.[0-9a-f]*,mp4a\.40\.2\"" "$work/master.m3u8" ||
        die "master.m3u8: $name lacks RESOLUTION/CODECS"
    grep -qx '#EXT-X-ENDLIST' "$pl" || die "$name: playlist has no #EXT-X-ENDLIST"
    mapfile -t segs < <(grep -v '^#' "$pl" | grep -v '^$')
    [ "${#segs[@]}" -eq "$expect_segs" ] ||
        die "$name: playlist lists ${#segs[@]} segments, expected $expect_segs"
    for s in "${segs[@]}"; do
        [ -s "$work/$name/$s" ] || die "$name: listed segment $s missing or empty"
    done
    extra=$(find "$work/$name" -name '*.ts' | wc -l)
    [ "$extra" -eq "$expect_segs" ] || die "$name: $extra .ts files, playlist lists $expect_segs"
    # Codecs and size, from the first and the last segment.
    for s in "${segs[0]}" "${segs[-1]}"; do
        got=$(ffprobe -v error -show_entries stream=codec_type,codec_name,width,height \
            -of compact=p=0:nk=1 "$work/$name/$s" | sort | tr '\n' ' ')
        case "$got" in
            *"aac|audio"*"h264|video|$w|$h"*) ;;
            *) die "$name/$s: unexpected streams: $got" ;;
        esac
    done
done

printf '%s\n' "$stamp_text" >"$work/$STAMP_NAME"

# Swap in the finished library.
if [ -e "$DIR" ]; then rm -rf "$DIR"; fi
mv "$work" "$DIR"
chmod 755 "$DIR"
trap - EXIT

end=$(date +%s.%N)
files=$(find "$DIR" -type f ! -name "$STAMP_NAME" | wc -l)
size=$(du -sh "$DIR" | cut -f1)
printf 'make-demo: %s ready: %d renditions x %d segments, %d files, %s (encode %.1fs, total %.1fs)\n' \
    "$DIR" "$n" "$expect_segs" "$files" "$size" \
    "$(echo "$enc_end - $start" | bc -l 2>/dev/null || echo 0)" \
    "$(echo "$end - $start" | bc -l 2>/dev/null || echo 0)"
