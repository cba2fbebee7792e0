package main

// The offline sample data the tools answer from. It is made up.

// employee is a row of the sample table.
type employee struct {
	Name       string `json:"name"`
	Department string `json:"department"`
	Title      string `json:"title"`
	Salary     int    `json:"salary"`
}

// sampleEmployees is database_query's table: 20 rows in four departments.
// Platform has four engineers (an engineering manager is not one).
var sampleEmployees = []employee{
	{"Ada Moreau", "Platform", "Staff Engineer", 215000},
	{"Bilal Okafor", "Platform", "Senior Engineer", 182000},
	{"Chen Wei", "Platform", "Senior Engineer", 178000},
	{"Dana Ruiz", "Platform", "Engineer", 142000},
	{"Erik Lund", "Platform", "Engineering Manager", 198000},
	{"Fatima Haddad", "Platform", "Product Manager", 165000},
	{"Gabriel Sousa", "Data", "Data Engineer", 150000},
	{"Hana Sato", "Data", "Senior Data Engineer", 176000},
	{"Ivan Petrov", "Data", "Data Scientist", 160000},
	{"Julia Novak", "Data", "Analyst", 112000},
	{"Kwame Mensah", "Data", "Manager", 170000},
	{"Lea Fischer", "Design", "Designer", 118000},
	{"Mateo Rossi", "Design", "Senior Designer", 139000},
	{"Nina Kowalski", "Design", "Design Engineer", 146000},
	{"Omar Farouk", "Design", "Design Manager", 158000},
	{"Priya Nair", "Sales", "Account Executive", 104000},
	{"Quinn Murphy", "Sales", "Senior Account Executive", 131000},
	{"Rosa Jimenez", "Sales", "Sales Engineer", 137000},
	{"Sven Berg", "Sales", "Sales Manager", 149000},
	{"Tomas Silva", "Sales", "Sales Development Representative", 82000},
}

// city is a city of the weather sample, with the names it answers to
// (lower case, as cityKey leaves them).
type city struct {
	name       string
	aliases    []string
	tempC      float64
	conditions string
	humidity   int
}

// sampleWeather is weather's offline sample.
var sampleWeather = []city{
	{"San Francisco", []string{"san francisco", "sf", "san fran", "sfo"}, 17, "morning fog, then sunny", 72},
	{"New York", []string{"new york", "new york city", "nyc", "ny"}, 22, "partly cloudy", 60},
	{"London", []string{"london"}, 14, "light rain", 81},
	{"Tokyo", []string{"tokyo"}, 24, "clear skies", 55},
	{"Sydney", []string{"sydney"}, 19, "sunny with a light breeze", 48},
}

// document is a canned web_search document.
type document struct {
	Title   string `json:"title"`
	URL     string `json:"url"`
	Snippet string `json:"snippet"`
}

// sampleDocuments are web_search's corpus.
var sampleDocuments = []document{
	{"libp2p: a modular network stack", "https://example.org/libp2p",
		"libp2p gives peers identities, transports (TCP, QUIC), secure channels and stream multiplexing for peer-to-peer applications."},
	{"Kademlia DHT explained", "https://example.org/kademlia",
		"A distributed hash table that routes lookups by XOR distance between peer IDs; used to find provider records and peers."},
	{"NAT traversal and hole punching", "https://example.org/hole-punching",
		"How peers behind NAT routers connect directly: a relay helps them meet, then both dial at once (DCUtR)."},
	{"Model Context Protocol (MCP) overview", "https://example.org/mcp",
		"MCP lets AI agents and applications expose tools and resources to language models over JSON-RPC."},
	{"JSON-RPC 2.0 in five minutes", "https://example.org/json-rpc",
		"Requests carry a method, params and an id; responses carry a result or an error with a code and a message."},
	{"Multi-agent orchestration patterns", "https://example.org/orchestration",
		"Plan a request into subtasks, route each to an agent that offers the skill, retry on another agent on failure, aggregate the answers."},
	{"Tokyo travel guide: seasons and weather", "https://example.org/tokyo-weather",
		"Tokyo has hot humid summers and mild winters; spring cherry blossoms peak in early April."},
	{"London in the rain: what to pack", "https://example.org/london-rain",
		"London weather changes quickly: light rain is common in every season, so pack a compact umbrella."},
	{"Go concurrency: goroutines and channels", "https://example.org/go-concurrency",
		"Goroutines are cheap threads managed by the Go runtime; channels pass values between them and synchronize."},
	{"Platform engineering team handbook", "https://example.org/platform-handbook",
		"The platform team builds the internal developer platform: deploy pipelines, observability and the service mesh."},
	{"Designing a salary band system", "https://example.org/salary-bands",
		"Salary bands group roles by level; engineers, designers and managers each get a band with a minimum and maximum salary."},
	{"Square roots and powers, a refresher", "https://example.org/math-refresher",
		"The square root of x is the number whose square is x; powers multiply a base by itself exponent times."},
}
