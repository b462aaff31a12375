// The chart's `helm test`: GET every URL of READYZ_URLS (space-separated) and fail unless each
// answers 200. Node.js alone (the product's image).
const urls = (process.env.READYZ_URLS || "").split(/\s+/).filter(Boolean);

(async () => {
  let failed = 0;
  for (const url of urls) {
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(5000) });
      console.log(`${url}: ${res.status}`);
      if (res.status !== 200) failed++;
    } catch (err) {
      console.log(`${url}: ${err.cause?.code ?? err.message}`);
      failed++;
    }
  }
  process.exit(urls.length > 0 && failed === 0 ? 0 : 1);
})();
