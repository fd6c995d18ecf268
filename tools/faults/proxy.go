package faults

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/Shopify/toxiproxy/v2"
	"github.com/Shopify/toxiproxy/v2/collectors"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// Proxies puts toxiproxy TCP proxies on loopback between clients and
// servers, so that a test can cut a client off (a partition) without
// touching the kernel. Everything stays on 127.0.0.1.
type Proxies struct {
	srv *toxiproxy.ApiServer
	all []*toxiproxy.Proxy
	n   int
}

// NewProxies returns an empty set of proxies.
func NewProxies() *Proxies {
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	srv.Metrics.ProxyMetrics = collectors.NewProxyMetricCollectors()
	return &Proxies{srv: srv}
}

// Link is the group of proxies one client talks through.
type Link struct {
	proxies []*toxiproxy.Proxy
}

// Rewrite starts one proxy per host of a backend URL ("etcd://a:1,b:2/p")
// and returns the URL with every host replaced by its proxy.
func (p *Proxies) Rewrite(rawURL string) (string, *Link, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", nil, err
	}
	link := &Link{}
	var hosts []string
	for _, h := range strings.Split(u.Host, ",") {
		px, err := p.start("127.0.0.1:0", h)
		if err != nil {
			return "", nil, err
		}
		link.proxies = append(link.proxies, px)
		hosts = append(hosts, px.Listen)
	}
	u.Host = strings.Join(hosts, ",")
	return u.String(), link, nil
}

// start runs one proxy from listen to upstream.
func (p *Proxies) start(listen, upstream string) (*toxiproxy.Proxy, error) {
	px := p.create(listen, upstream)
	if err := px.Start(); err != nil {
		return nil, fmt.Errorf("proxy %s -> %s: %w", listen, upstream, err)
	}
	return px, nil
}

// create makes a proxy from listen to upstream that does not listen yet.
func (p *Proxies) create(listen, upstream string) *toxiproxy.Proxy {
	p.n++
	px := toxiproxy.NewProxy(p.srv, fmt.Sprintf("p%d", p.n), listen, upstream)
	p.all = append(p.all, px)
	return px
}

// Cut blackholes the link both ways: connections stay open and data is
// held, as in a network partition (no reset that would tell the client).
func (l *Link) Cut() error {
	for _, px := range l.proxies {
		for _, stream := range []string{"upstream", "downstream"} {
			js := fmt.Sprintf(`{"name":"cut-%s","type":"timeout","stream":%q,"attributes":{"timeout":0}}`, stream, stream)
			if _, err := px.Toxics.AddToxicJson(strings.NewReader(js)); err != nil {
				return err
			}
		}
	}
	return nil
}

// Slow delays every byte on the link by latency, plus or minus jitter, in
// both directions, until Heal.
func (l *Link) Slow(latency, jitter time.Duration) error {
	for _, px := range l.proxies {
		for _, stream := range []string{"upstream", "downstream"} {
			js := fmt.Sprintf(`{"name":"slow-%s","type":"latency","stream":%q,"attributes":{"latency":%d,"jitter":%d}}`,
				stream, stream, latency.Milliseconds(), jitter.Milliseconds())
			if _, err := px.Toxics.AddToxicJson(strings.NewReader(js)); err != nil {
				return err
			}
		}
	}
	return nil
}

// Heal removes the partition or the delay.
func (l *Link) Heal() {
	for _, px := range l.proxies {
		px.Toxics.ResetToxics(context.Background())
	}
}

// Close stops every proxy.
func (p *Proxies) Close() {
	for _, px := range p.all {
		px.Stop()
	}
}
