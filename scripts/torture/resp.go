package main

import (
	"bytes"
	"errors"
	"strconv"
	"strings"
)

// RESP framing, as much as the proxy needs to lose one command's reply:
// where each request and each reply ends, and a request's command name.
// It reads RESP2 and RESP3 (go-redis v9 speaks RESP3 after HELLO 3).

var errNotRESP = errors.New("not RESP")

// respEnd returns the end of the RESP value that starts at b[i], or -1
// when b holds only part of it.
func respEnd(b []byte, i int) (int, error) {
	if i >= len(b) {
		return -1, nil
	}
	nl := bytes.Index(b[i:], []byte("\r\n"))
	if nl < 0 {
		return -1, nil
	}
	line, next := b[i+1:i+nl], i+nl+2
	switch b[i] {
	case '+', '-', ':', '_', '#', ',', '(':
		return next, nil
	case '$', '!', '=': // bulk: length, then that many bytes and CRLF
		n, err := strconv.Atoi(string(line))
		if err != nil {
			return 0, errNotRESP
		}
		if n < 0 {
			return next, nil
		}
		if next+n+2 > len(b) {
			return -1, nil
		}
		return next + n + 2, nil
	case '*', '~', '>', '%', '|': // aggregates: count, then the elements (pairs for maps and attributes)
		n, err := strconv.Atoi(string(line))
		if err != nil {
			return 0, errNotRESP
		}
		if b[i] == '%' || b[i] == '|' {
			n *= 2
		}
		for ; n > 0; n-- {
			if next, err = respEnd(b, next); next < 0 || err != nil {
				return next, err
			}
		}
		return next, nil
	}
	return 0, errNotRESP
}

// respReply returns the end of the first reply in b (an attribute before
// it belongs to it) and whether it is a push (pub/sub messages in RESP3,
// which answer no request), or end -1 when b holds only part of it.
func respReply(b []byte) (end int, push bool, err error) {
	i := 0
	for {
		if len(b) > i && b[i] == '|' {
			if i, err = respEnd(b, i); i < 0 || err != nil {
				return i, false, err
			}
			continue
		}
		end, err = respEnd(b, i)
		return end, len(b) > i && b[i] == '>', err
	}
}

// respCommand returns the end of the first request in b and its command
// name, upper-cased (go-redis sends every request as an array of bulk
// strings), or end -1 when b holds only part of it.
func respCommand(b []byte) (end int, name string, err error) {
	if len(b) > 0 && b[0] != '*' {
		return 0, "", errNotRESP
	}
	end, err = respEnd(b, 0)
	if end < 0 || err != nil {
		return end, "", err
	}
	// The first element: "$<len>\r\n<name>\r\n" after the count's line.
	nl := bytes.Index(b, []byte("\r\n"))
	if first := b[nl+2:]; len(first) > 0 && first[0] == '$' {
		if l := bytes.Index(first, []byte("\r\n")); l > 0 {
			n, _ := strconv.Atoi(string(first[1:l]))
			if l+2+n <= len(first) && n >= 0 {
				name = strings.ToUpper(string(first[l+2 : l+2+n]))
			}
		}
	}
	return end, name, nil
}
