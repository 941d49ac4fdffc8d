package persistence

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/oklog/ulid/v2"
)

// ErrNotFound is returned when a record does not exist (or belongs to another team).
var ErrNotFound = errors.New("not found")

// TokenPrefix starts every API token, so leaked tokens are easy to recognise and scan for.
const TokenPrefix = "ff_"

// NewToken returns a fresh random API token and the hash under which it is stored.
func NewToken() (token string, hash [32]byte) {
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		panic(fmt.Sprintf("crypto/rand failed: %v", err))
	}
	token = TokenPrefix + base64.RawURLEncoding.EncodeToString(raw[:])
	return token, HashToken(token)
}

// HashToken is the stored form of a token.
func HashToken(token string) [32]byte { return sha256.Sum256([]byte(token)) }

// ensureTeam returns the team with this name, creating it with the id and webhook secret given
// when there is none.
func (t *txn) ensureTeam(name string, newID ulid.ULID, webhookSecret string, at time.Time) (Team, bool, error) {
	name = strings.TrimSpace(name)
	if name == "" {
		return Team{}, false, errors.New("team name is empty")
	}
	if raw := t.get(bucketTeamNames, []byte(name)); raw != nil {
		team, err := t.Team(ulidAt(raw))
		return team, false, err
	}
	team := Team{ID: newID, Name: name, WebhookSecret: webhookSecret, CreatedAt: at}
	if err := t.putTeam(team); err != nil {
		return Team{}, false, err
	}
	return team, true, t.bucket(bucketTeamNames).Put([]byte(name), id(team.ID))
}

// putTeam writes a team's record.
func (t *txn) putTeam(team Team) error {
	delete(t.policies, team.ID)
	return t.putJSON(bucketTeams, id(team.ID), team)
}

// Team loads a team by id.
func (t *txn) Team(teamID ulid.ULID) (Team, error) {
	var team Team
	found, err := t.getJSON(bucketTeams, id(teamID), &team)
	if err == nil && !found {
		err = ErrNotFound
	}
	return team, err
}

// Token returns the token stored under a hash.
func (t *txn) Token(hash [32]byte) (*Token, error) {
	tok := &Token{Hash: hash}
	found, err := t.getJSON(bucketTokens, hash[:], tok)
	if err == nil && !found {
		err = ErrNotFound
	}
	return tok, err
}

// Tokens lists every token with its team, oldest first.
func (t *txn) Tokens() ([]TeamToken, error) {
	var out []TeamToken
	var err error
	t.scanPrefix(bucketTokens, nil, func(k, raw []byte) bool {
		tok := &Token{}
		if err = json.Unmarshal(raw, tok); err != nil {
			err = fmt.Errorf("decode token record: %w", err)
			return false
		}
		copy(tok.Hash[:], k)
		var team Team
		if team, err = t.Team(tok.TeamID); err != nil {
			return false
		}
		out = append(out, TeamToken{Token: tok, Team: team})
		return true
	})
	slices.SortStableFunc(out, func(a, b TeamToken) int { return a.CreatedAt.Compare(b.CreatedAt) })
	return out, err
}

// TeamToken is a token with its team.
type TeamToken struct {
	*Token
	Team Team
}

// tokenByID finds the token an ID (the hex start of its hash) names.
func (t *txn) tokenByID(tokenID string) (*Token, error) {
	prefix, err := hex.DecodeString(tokenID)
	if err != nil || len(prefix) != TokenIDLength {
		return nil, ErrNotFound
	}
	var tok *Token
	t.scanPrefix(bucketTokens, prefix, func(k, raw []byte) bool {
		tok = &Token{}
		if err = json.Unmarshal(raw, tok); err != nil {
			return false
		}
		copy(tok.Hash[:], k)
		return false
	})
	if err != nil {
		return nil, err
	}
	if tok == nil {
		return nil, ErrNotFound
	}
	return tok, nil
}

// NewWebhookSecret makes the key a new team's webhooks are signed with (32 random bytes, hex).
func NewWebhookSecret() (string, error) {
	var secret [32]byte
	if _, err := rand.Read(secret[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(secret[:]), nil
}

// HasTeams reports whether any team exists (a first start has none).
func (t *txn) HasTeams() bool {
	k, _ := t.bucket(bucketTeams).Cursor().First()
	return k != nil
}
