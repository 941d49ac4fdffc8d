// framefarm's Lottie worker: renders Lottie animations frame by frame with Skia's Skottie.
//
// One long-lived process per render slot, driven by the Go render node. Requests arrive as JSON
// lines on stdin; answers leave as JSON lines on stdout. Frames, raw RGBA, are written to the
// named pipe each request gives (ffmpeg reads the other end), never to stdout.
//
//   -> {"id": 1, "file": "/work/anim.json", "out": "/work/frames.fifo", "width": 960, "height": 540,
//       "from": 0, "to": 299}
//   <- {"id": 1, "type": "info", "frames": 300, "fps": 30, "width": 1920, "height": 1080}
//   <- {"id": 1, "type": "frame", "frame": 0}            (one per frame written)
//   <- {"id": 1, "type": "done"}  or  {"id": 1, "type": "error", "message": "..."}
'use strict'

const fs = require('fs')
const readline = require('readline')
const { LottieAnimation, createCanvas } = require('@napi-rs/canvas')

function send(msg) {
  process.stdout.write(JSON.stringify(msg) + '\n')
}

function render(req) {
  const animation = LottieAnimation.loadFromFile(req.file)
  const width = req.width || animation.width
  const height = req.height || animation.height
  send({ id: req.id, type: 'info', frames: animation.frames, fps: animation.fps, width: animation.width, height: animation.height })
  const from = Math.max(0, req.from | 0)
  const to = Math.min(animation.frames - 1, req.to === undefined ? animation.frames - 1 : req.to | 0)
  if (to < from) {
    throw new Error(`frames ${req.from} to ${req.to} are outside the animation's ${animation.frames} frames`)
  }
  const canvas = createCanvas(width, height)
  const ctx = canvas.getContext('2d')
  const dst = { x: 0, y: 0, width, height }
  const out = fs.openSync(req.out, 'w')
  try {
    for (let frame = from; frame <= to; frame++) {
      ctx.clearRect(0, 0, width, height)
      animation.seekFrame(frame)
      animation.render(ctx, dst)
      const pixels = canvas.data()
      let written = 0
      while (written < pixels.length) {
        written += fs.writeSync(out, pixels, written, pixels.length - written)
      }
      send({ id: req.id, type: 'frame', frame })
    }
  } finally {
    fs.closeSync(out)
  }
}

const lines = readline.createInterface({ input: process.stdin })
lines.on('line', (line) => {
  let req
  try {
    req = JSON.parse(line)
  } catch (e) {
    send({ type: 'error', message: 'request is not JSON: ' + e.message })
    return
  }
  try {
    render(req)
    send({ id: req.id, type: 'done' })
  } catch (e) {
    send({ id: req.id, type: 'error', message: String(e && e.message ? e.message : e) })
  }
})
lines.on('close', () => process.exit(0))
send({ type: 'ready', versions: { node: process.versions.node } })
