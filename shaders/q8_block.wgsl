// One block of an 8-bit activation row, the second operand of the integer-dot
// matvec (shaders/matvec_q8.wgsl), quantized as the cpu backend's
// (src/backend/cpu/kernels/act.rs): from 32 values (zero past the row),
// q = round(x * 127 / max|x|) (ties to even) packed four to a word, then
// d = max|x| / 127 and s = d * sum(q), both rounded to f16 precision, and the
// integer sum(q). Block b is xq[3b] (values 0..15), xq[3b + 1] (16..31) and
// xq[3b + 2] = (d, sum, s, 0). A non-finite value makes d NaN (`nan`: WGSL has
// no NaN literal, the caller's parameters carry one), so every product over
// the block is NaN as the reference's would be. `xq` is the includer's.

// v rounded to the nearest f16 (ties to even), as an f32: by hand, because
// pack2x16float leaves the rounding to the driver (not to nearest on every GPU).
fn f16_precision(v: f32) -> f32 {
    let a = abs(v);
    let bits = bitcast<u32>(v);
    if a < 6.1035156e-5 {
        // f16 subnormals: multiples of 2^-24.
        return round(v * 16777216.0) / 16777216.0;
    }
    if a >= 65520.0 {
        return bitcast<f32>((bits & 0x80000000u) | 0x7f800000u);
    }
    return bitcast<f32>((bits + 0xfffu + ((bits >> 13u) & 1u)) & 0xffffe000u);
}

fn q8_store(b: u32, v: array<f32, 32>, nan: f32) {
    var amax = 0.0;
    var total = 0.0;
    for (var i = 0u; i < 32u; i++) {
        amax = max(amax, abs(v[i]));
        total += abs(v[i]);
    }
    var words: array<u32, 8>;
    var sum = 0;
    for (var j = 0u; j < 8u; j++) {
        let q = q8_quant4(vec4<f32>(v[4u * j], v[4u * j + 1u], v[4u * j + 2u], v[4u * j + 3u]), amax);
        sum += q.x + q.y + q.z + q.w;
        words[j] = pack4xI8(q);
    }
    xq[3u * b] = vec4<u32>(words[0], words[1], words[2], words[3]);
    xq[3u * b + 1u] = vec4<u32>(words[4], words[5], words[6], words[7]);
    xq[3u * b + 2u] = q8_scales(amax, total, sum, nan);
}

// A block's third word, (d, sum, s, 0), from its max|x|, its sum of |x|
// (not finite: d is `nan`) and its integer sum.
fn q8_scales(amax: f32, total: f32, sum: i32, nan: f32) -> vec4<u32> {
    var d = amax / 127.0;
    if !(total <= 3.4028235e38) {
        d = nan;
    }
    return vec4<u32>(
        bitcast<u32>(f16_precision(d)),
        bitcast<u32>(sum),
        bitcast<u32>(f16_precision(d * f32(sum))),
        0u,
    );
}

// Four values of a block with max|x| `amax`, as integers in -127 ..= 127.
fn q8_quant4(v: vec4<f32>, amax: f32) -> vec4<i32> {
    let id = select(0.0, 127.0 / amax, amax > 0.0);
    return vec4<i32>(clamp(round(v * id), vec4<f32>(-127.0), vec4<f32>(127.0)));
}

// Part j (values 4j .. 4j + 3, quantized to q) of block b; part 0 also
// writes the block's scales (q8_scales).
fn q8_put_part(b: u32, j: u32, q: vec4<i32>, amax: f32, total: f32, sum: i32, nan: f32) {
    xq[3u * b + (j >> 2u)][j & 3u] = pack4xI8(q);
    if j == 0u {
        xq[3u * b + 2u] = q8_scales(amax, total, sum, nan);
    }
}
